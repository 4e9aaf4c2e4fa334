// Package numtest holds numeric test helpers shared by the tests of several
// packages: deterministic random sources derived from a base seed and each
// test's name and case (NINFER_TEST_SEED sets another base), a tolerance check of float32 results against a float64
// reference (named presets, tail caps, relative L2, non-finite values fail),
// random token ids, float32→float64 widening, and reference decoders of the
// half-precision and FP8 formats.
// It is imported only by _test.go files.
package numtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// SeedEnv names the environment variable that overrides the base seed.
const SeedEnv = "NINFER_TEST_SEED"

// DefaultBase is the base seed every test derives its own seed from when
// NINFER_TEST_SEED is unset, so two runs of the same commit draw the same
// inputs (CI is deterministic; fresh bases are for make test-seeds).
const DefaultBase uint64 = 0x6e696e6665720015

// Base returns the base seed: NINFER_TEST_SEED when set (a malformed value
// fails the test), else DefaultBase.
func Base(t testing.TB) uint64 {
	t.Helper()
	s := os.Getenv(SeedEnv)
	if s == "" {
		return DefaultBase
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: not an unsigned 64-bit integer: %v", SeedEnv, s, err)
	}
	return v
}

// Derive mixes the base seed with a test's name and any case keys into one
// seed (FNV-1a over the strings, finished with splitmix64). Equal inputs give
// equal seeds on every run and machine; the seed of one key never depends on
// which other keys (backends, cases) exist.
func Derive(base uint64, name string, keys ...string) uint64 {
	h := uint64(14695981039346656037)
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h ^= 0xff // separator: ("ab","c") and ("a","bc") differ
		h *= 1099511628211
	}
	mix(name)
	for _, k := range keys {
		mix(k)
	}
	z := base ^ h
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Source hands out the random streams of one test: each derived from the
// base seed, the test's full name and a case key, so a stream's draws never
// depend on which other streams (backends, cases) the test uses. When the
// test fails, the base seed and the command that replays it are logged.
type Source struct {
	t    testing.TB
	base uint64
}

// NewSource returns test t's source of random streams.
func NewSource(t testing.TB) *Source {
	t.Helper()
	s := &Source{t: t, base: Base(t)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random inputs from base seed %d; replay: %s", s.base, ReplayCommand(t, s.base))
		}
	})
	return s
}

// Seed is the seed of the case named by keys.
func (s *Source) Seed(keys ...string) uint64 { return Derive(s.base, s.t.Name(), keys...) }

// Stream is the random stream of the case named by keys (for example a
// backend's name, or backend and format).
func (s *Source) Stream(keys ...string) *rand.Rand {
	seed := s.Seed(keys...)
	return rand.New(rand.NewPCG(seed, ^seed))
}

// Seed returns the seed of test t and the case named by keys (see Source).
func Seed(t testing.TB, keys ...string) uint64 {
	t.Helper()
	return NewSource(t).Seed(keys...)
}

// Seeded returns the random stream of test t (one stream for the whole test).
func Seeded(t testing.TB) *rand.Rand {
	t.Helper()
	return NewSource(t).Stream()
}

// ReplayCommand is the command line that reruns test t with base seed base.
func ReplayCommand(t testing.TB, base uint64) string {
	top := t.Name()
	if i := strings.IndexByte(top, '/'); i >= 0 {
		top = top[:i]
	}
	tags := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			if kv.Key == "-tags" && kv.Value != "" {
				tags = " -tags " + kv.Value
			}
		}
	}
	return fmt.Sprintf("%s=%d go test%s -count=1 -run '^%s$' %s", SeedEnv, base, tags, top, packageDir())
}

// packageDir is the test's package directory relative to the module root
// ("./pkg/backend"), or "." when the root cannot be found.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// Tolerance is a named tolerance preset: a result passes when every element
// has |got−want| ≤ Atol + Rtol·|want|, or when all three tail caps hold (the
// fraction of violating elements, the worst violation as a multiple of its
// bound, and the relative L2 error of the whole result). Non-finite values
// always fail.
type Tolerance struct {
	Name              string
	Atol, Rtol        float64
	TailFrac, TailMax float64
	RelL2             float64
}

// Compare returns nil when got matches want within tol, else an error that
// names what, the preset, the violation count, the worst element and the
// relative L2 error.
func Compare(what string, got []float32, want []float64, tol Tolerance) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, want %d", what, len(got), len(want))
	}
	var viol int
	var worst, num, den float64
	worstAt := -1
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("%s[%d]: non-finite value got %v want %v", what, i, g, w)
		}
		d := math.Abs(g - w)
		bound := tol.Atol + tol.Rtol*math.Abs(w)
		num += d * d
		den += w * w
		if d > bound {
			viol++
			r := math.Inf(1)
			if bound > 0 {
				r = d / bound
			}
			if r > worst {
				worst, worstAt = r, i
			}
		}
	}
	if viol == 0 {
		return nil
	}
	rel := math.Sqrt(num / math.Max(den, 1e-300))
	frac := float64(viol) / float64(len(got))
	if frac <= tol.TailFrac && worst <= tol.TailMax && rel <= tol.RelL2 {
		return nil
	}
	return fmt.Errorf("%s (%s): %d/%d values out of tolerance (worst ×%.3g at %d: got %v want %v), rel-L2 %.3g",
		what, tol.Name, viol, len(got), worst, worstAt, got[worstAt], want[worstAt], rel)
}

// Check fails t when Compare reports a mismatch.
func Check(t testing.TB, what string, got []float32, want []float64, tol Tolerance) {
	t.Helper()
	if err := Compare(what, got, want, tol); err != nil {
		t.Fatal(err)
	}
}

// F64 widens float32 values to float64 (a float32 result as the reference
// of another).
func F64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// RandIDs returns n token ids drawn uniformly from [0, vocab) in order.
func RandIDs(r *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}
