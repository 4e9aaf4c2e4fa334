package artifact

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames oldpath to newpath unless newpath exists, in one
// atomic step: renameat2(RENAME_NOREPLACE), or where the file system or
// kernel lacks it, a hard link (which fails when newpath exists) and the
// removal of oldpath. The error for an existing newpath matches
// fs.ErrExist.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EEXIST) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.ENOTSUP) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	if err := os.Link(oldpath, newpath); err != nil {
		return err // an *os.LinkError; EEXIST matches fs.ErrExist
	}
	return os.Remove(oldpath)
}
