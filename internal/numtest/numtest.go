// Package numtest holds numeric test helpers shared by the tests of several
// packages: a per-run seeded random source that can be replayed
// (NINFER_TEST_SEED), a tolerance check of float32 results against a float64
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
	"strconv"
	"testing"
	"time"
)

// SeedEnv names the environment variable that replays a logged seed.
const SeedEnv = "NINFER_TEST_SEED"

// Seed returns a fresh per-run seed, or the one in NINFER_TEST_SEED when it
// is set (a malformed value fails the test). The seed is logged together
// with the way to replay it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, SeedEnv, seed)
	return seed
}

// Seeded returns a random source seeded by Seed.
func Seeded(t testing.TB) *rand.Rand {
	t.Helper()
	seed := Seed(t)
	return rand.New(rand.NewPCG(seed, ^seed))
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
