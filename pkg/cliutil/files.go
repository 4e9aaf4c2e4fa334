package cliutil

import (
	"bufio"
	"fmt"
	"io"
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
// positional output. Input "" is skipped; input "-" is standard input,
// compared when it is a regular file ("< m.jsonl", whose name the tool never
// sees: the message names it "standard input"). An output that does not
// exist yet is skipped.
func CheckOutputNotInput(flag, out string, inputs ...string) error {
	if out == "" || out == "-" {
		return nil
	}
	outs := outputInfos(out)
	if len(outs) == 0 {
		return nil
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		infos := statBoth(in)
		if in == "-" {
			infos = stdinInfo()
			in = "standard input"
		}
		for _, ii := range infos {
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

// stdinInfo is the file standard input reads when it is a regular file
// (a redirection "< FILE"); a terminal or pipe cannot be replaced.
func stdinInfo() []fs.FileInfo {
	if os.Stdin == nil {
		return nil
	}
	fi, err := os.Stdin.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	return []fs.FileInfo{fi}
}

// CheckOutputsDiffer refuses two outputs of one run that name the same file
// (by name, in another spelling, or through a link), whether or not it
// exists yet: the second write would replace the first (a usage error
// naming both: "--save-logits x: is also --output-file x (...)"). Each
// output is given as flag, path; "" and "-" are skipped.
func CheckOutputsDiffer(flagA, a, flagB, b string) error {
	if a == "" || a == "-" || b == "" || b == "-" || !sameOutput(a, b) {
		return nil
	}
	return Usagef("%s %s: is also %s %s (two outputs of one run must differ; choose another path)", flagB, b, flagA, a)
}

func sameOutput(a, b string) bool {
	for _, ai := range outputInfos(a) {
		for _, bi := range outputInfos(b) {
			if os.SameFile(ai, bi) {
				return true
			}
		}
	}
	ra, rb := resolvedName(a), resolvedName(b)
	return ra != "" && ra == rb
}

// resolvedName is the absolute path out names, its parent directory's
// links resolved (the file itself may not exist yet).
func resolvedName(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		p = filepath.Join(dir, filepath.Base(p))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	return abs
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

// MaxInputBytes bounds what ReadAllLimit reads from standard input (1 GiB):
// "< /dev/zero" or an endless pipe must fail, not grow until memory runs out.
const MaxInputBytes = 1 << 30

// ReadAllLimit reads r to the end like io.ReadAll, failing once more than
// limit bytes arrive: "NAME: input larger than N bytes (read it from a
// file)". name is how the message names the input ("<stdin>").
func ReadAllLimit(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: input larger than %d bytes (the most a tool reads from standard input)", name, limit)
	}
	return data, nil
}

// MaxLineBytes is the longest input line a line-by-line tool accepts: one
// line of text is tokenized (or parsed) whole, so an endless line (a stream
// without newlines, < /dev/zero) must fail instead of growing without bound.
const MaxLineBytes = 64 << 20

// LineReader reads lines of at most a limit of bytes.
type LineReader struct {
	r     *bufio.Reader
	name  string
	limit int
	buf   []byte
}

// NewLineReader reads lines from r; name is how errors name the input.
func NewLineReader(r io.Reader, name string, limit int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), name: name, limit: limit}
}

// ReadLine returns the next line with its newline (if any), like
// bufio.Reader.ReadString('\n'): io.EOF with the last, unterminated line or
// with "" at the end. A line longer than the limit is an error naming the
// input, the line number n and the limit.
func (l *LineReader) ReadLine(n int) (string, error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > l.limit {
			return "", fmt.Errorf("%s: line %d is longer than %d bytes (split the input into lines, or use a file)", l.name, n, l.limit)
		}
		l.buf = append(l.buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return string(l.buf), err
	}
}
