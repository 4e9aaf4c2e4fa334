package cliutil

import (
	"io/fs"
	"os"
	"path/filepath"
)

// FileKind names the kind of a file that is not a regular file, as error
// lines say it: "a named pipe", "a directory", "a socket", "a device".
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// CheckRegularFile refuses an input path that is not a regular file (a
// named pipe, a device, a socket, a directory), which would block the run
// forever or fail late: "PATH: not a regular file (a named pipe)", a usage
// error. It only stats the path (following links), never opens it. "" and
// "-" (standard input, where a tool supports it) pass, and so does a path
// that cannot be stat'ed: the open that follows reports that error in the
// tool's words.
func CheckRegularFile(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil
	}
	return Usagef("%s: not a regular file (%s)", path, FileKind(fi.Mode()))
}

// CheckRegularFiles applies CheckRegularFile to every path.
func CheckRegularFiles(paths ...string) error {
	for _, p := range paths {
		if err := CheckRegularFile(p); err != nil {
			return err
		}
	}
	return nil
}

// CheckOutputNotInput refuses an output path that names one of the run's
// inputs, also through a symbolic link (of the output, of a parent
// directory, or of the input) or a hard link: writing the output would
// replace the input (a usage error naming both paths: "--output-file
// m.ninfer: is the input m.ninfer (an output never replaces an input)").
// flag is the output's flag as typed ("--output-file", "-o") or "" for a
// positional output. Inputs "" and "-" are skipped; so is an output that
// does not exist yet.
func CheckOutputNotInput(flag, out string, inputs ...string) error {
	if out == "" || out == "-" {
		return nil
	}
	outs := outputInfos(out)
	if len(outs) == 0 {
		return nil
	}
	for _, in := range inputs {
		if in == "" || in == "-" {
			continue
		}
		for _, ii := range statBoth(in) {
			for _, oi := range outs {
				if os.SameFile(ii, oi) {
					what := out
					if flag != "" {
						what = flag + " " + out
					}
					return Usagef("%s: is the input %s (an output never replaces an input; choose another path)", what, in)
				}
			}
		}
	}
	return nil
}

// outputInfos is what out names: the file it reaches through links, the
// link itself, and the file named by its resolved parent directory and
// base name.
func outputInfos(out string) []fs.FileInfo {
	infos := statBoth(out)
	if dir, err := filepath.EvalSymlinks(filepath.Dir(out)); err == nil {
		infos = append(infos, statBoth(filepath.Join(dir, filepath.Base(out)))...)
	}
	return infos
}

func statBoth(p string) []fs.FileInfo {
	var out []fs.FileInfo
	if fi, err := os.Stat(p); err == nil {
		out = append(out, fi)
	}
	if fi, err := os.Lstat(p); err == nil {
		out = append(out, fi)
	}
	return out
}

// CheckIO is the check every tool runs on its file arguments before any
// work: each input a regular file (CheckRegularFile), and the output, if
// any, none of them (CheckOutputNotInput).
func CheckIO(outFlag, out string, inputs ...string) error {
	if err := CheckRegularFiles(inputs...); err != nil {
		return err
	}
	return CheckOutputNotInput(outFlag, out, inputs...)
}
