// Package corpus reads token-id corpora: text files of whitespace-separated
// non-negative decimal int32 ids (the .ids format of ninfer-bench), and
// makes the seeded pseudo-random corpus ninfer-bench uses without one.
package corpus

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/termsafe"
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
				// A 5 MB token, or a model file given as the corpus, is
				// quoted as a short excerpt with its position.
				return nil, fmt.Errorf("%s: line %d: token %d: %s is not a non-negative int32 id",
					name, line, k+1, termsafe.Quote(w))
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

// RandomSeed is the seed of ninfer-bench's pseudo-random fallback corpus.
const RandomSeed = 20261201

// Random returns n token ids uniform in [0, vocab) from a PCG seeded with
// seed: the same ids on every machine and every run, like llama-bench's
// random prompt tokens. A benchmark over them measures speed, not
// acceptance or quality (speculative acceptance on random text is
// meaningless).
func Random(vocab, n int, seed uint64) []int32 {
	if vocab < 1 || n < 1 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, seed^0x6e696e666572)) // "ninfer"
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

// RandomName is how a Random corpus is recorded (config.corpus_path):
// "random:seed=S,tokens=N,vocab=V".
func RandomName(vocab, n int, seed uint64) string {
	return fmt.Sprintf("random:seed=%d,tokens=%d,vocab=%d", seed, n, vocab)
}
