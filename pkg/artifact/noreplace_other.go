//go:build !linux

package artifact

import "os"

// renameNoReplace renames oldpath to newpath unless newpath exists: a hard
// link (which fails when newpath exists) and the removal of oldpath.
func renameNoReplace(oldpath, newpath string) error {
	if err := os.Link(oldpath, newpath); err != nil {
		return err
	}
	return os.Remove(oldpath)
}
