// Package corpus reads token-id corpora: text files of whitespace-separated
// non-negative decimal int32 ids (the .ids format of ninfer-bench).
package corpus

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Read parses ids from r; name labels errors, which give the 1-based line
// and the 1-based token position within it ("c.ids: line 3: token 2: ..."),
// like ninfer-run --ids. Every id must be a decimal int32 ≥ 0 and, when
// vocab > 0, below vocab.
func Read(r io.Reader, name string, vocab int) ([]int32, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var ids []int32
	for line := 1; sc.Scan(); line++ {
		for k, w := range strings.Fields(sc.Text()) {
			v, err := strconv.ParseInt(w, 10, 32)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%s: line %d: token %d: %q is not a non-negative int32 id", name, line, k+1, w)
			}
			if vocab > 0 && v >= int64(vocab) {
				return nil, fmt.Errorf("%s: line %d: token %d: id %d is outside the vocabulary [0,%d)", name, line, k+1, v, vocab)
			}
			ids = append(ids, int32(v))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ids, nil
}

// ReadFile reads a whole .ids file; an empty file is an error.
func ReadFile(path string, vocab int) ([]int32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open corpus ids file: %s: %w", path, err)
	}
	defer f.Close()
	ids, err := Read(f, path, vocab)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("corpus ids file is empty: %s", path)
	}
	return ids, nil
}
