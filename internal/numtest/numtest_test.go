package numtest

import (
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	tight := Tolerance{Name: "tight", Atol: 1e-6, Rtol: 1e-6}
	tail := Tolerance{Name: "tail", Atol: 1e-6, Rtol: 0, TailFrac: 0.25, TailMax: 4, RelL2: 1e-2}
	want := []float64{1, -2, 3, 0.5}
	tests := []struct {
		name    string
		got     []float32
		want    []float64
		tol     Tolerance
		wantErr string // "" = pass
	}{
		{"exact", []float32{1, -2, 3, 0.5}, want, tight, ""},
		{"within rtol", []float32{1, -2, 3.000002, 0.5}, want, tight, ""},
		{"out of tolerance", []float32{1, -2, 3.01, 0.5}, want, tight, "tight): 1/4 values out of tolerance"},
		{"tail caps hold", []float32{1, -2, 3.000003, 0.5}, want, tail, ""},
		{"tail too wide", []float32{1, -2, 3.000003, 0.500003}, want, tail, "2/4 values"},
		{"tail too deep", []float32{1, -2, 3.00001, 0.5}, want, tail, "worst ×"},
		{"zero bound", []float32{1, -2, 3.000001, 0.5}, want, Tolerance{Name: "exact"}, "worst ×+Inf at 2"},
		{"length", []float32{1, 2}, want, tight, "2 values, want 4"},
		{"NaN got", []float32{1, float32(math.NaN()), 3, 0.5}, want, tail, "[1]: non-finite"},
		{"Inf got", []float32{1, -2, float32(math.Inf(1)), 0.5}, want, tail, "[2]: non-finite"},
		{"NaN want", []float32{1, -2, 3, 0.5}, []float64{1, -2, math.NaN(), 0.5}, tail, "[2]: non-finite"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Compare("x", tc.got, tc.want, tc.tol)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("passed, want error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestSeedsAreDeterministic(t *testing.T) {
	t.Setenv(SeedEnv, "")
	if got := Base(t); got != DefaultBase {
		t.Fatalf("Base without %s = %d, want DefaultBase %d", SeedEnv, got, DefaultBase)
	}
	a, b := Seeded(t), Seeded(t)
	for i := 0; i < 4; i++ {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: %d != %d for the same test", i, x, y)
		}
	}
	src := NewSource(t)
	// A stream depends on its own key only: the same key gives the same
	// draws whether or not other streams were taken first.
	first := src.Stream("cpu-avx2", "q8").Uint64()
	_ = src.Stream("cpu-avx512").Uint64()
	if again := src.Stream("cpu-avx2", "q8").Uint64(); again != first {
		t.Fatalf("stream (cpu-avx2, q8) changed after another stream was drawn: %d then %d", first, again)
	}
	seeds := map[uint64]string{}
	for _, keys := range [][]string{{}, {"a"}, {"b"}, {"ab"}, {"a", "b"}, {"", "ab"}, {"ab", ""}} {
		s := Derive(DefaultBase, "TestX", keys...)
		if prev, dup := seeds[s]; dup {
			t.Fatalf("keys %q and %s derive the same seed %d", keys, prev, s)
		}
		seeds[s] = fmt.Sprintf("%q", keys)
	}
	if Derive(1, "TestX") == Derive(2, "TestX") || Derive(1, "TestX") == Derive(1, "TestY") {
		t.Fatal("base or name does not change the derived seed")
	}
	// Pinned value: the derivation must not change silently (it would change
	// every test's inputs).
	if got, want := Derive(DefaultBase, "TestX", "k"), uint64(5457623353021454095); got != want {
		t.Fatalf("Derive(DefaultBase, TestX, k) = %d, want the pinned %d", got, want)
	}
}

func TestSeedOverride(t *testing.T) {
	t.Setenv(SeedEnv, "12345")
	if got := Base(t); got != 12345 {
		t.Fatalf("Base = %d, want 12345", got)
	}
	if got, want := Seed(t, "k"), Derive(12345, t.Name(), "k"); got != want {
		t.Fatalf("Seed = %d, want Derive(12345, name, k) = %d", got, want)
	}
	cmd := ReplayCommand(t, 12345)
	for _, part := range []string{"NINFER_TEST_SEED=12345", "-run '^TestSeedOverride$'", "./internal/numtest"} {
		if !strings.Contains(cmd, part) {
			t.Errorf("replay command %q lacks %q", cmd, part)
		}
	}
}

func TestCodecs(t *testing.T) {
	f16 := []struct {
		h    uint16
		want float64
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x3555, 0.333251953125},
		{0x0001, math.Ldexp(1, -24)}, {0x03ff, math.Ldexp(1023, -24)}, {0x0400, math.Ldexp(1, -14)},
		{0x7bff, 65504}, {0x7c00, math.Inf(1)}, {0xfc00, math.Inf(-1)},
	}
	for _, c := range f16 {
		if got := F16ToF64(c.h); got != c.want {
			t.Errorf("F16ToF64(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
	if !math.IsNaN(F16ToF64(0x7e00)) || !math.Signbit(F16ToF64(0x8000)) {
		t.Errorf("F16ToF64: NaN or -0 not decoded")
	}
	e4m3 := []struct {
		b    uint8
		want float64
	}{
		{0x00, 0}, {0x38, 1}, {0xc0, -2}, {0x01, math.Ldexp(1, -9)}, {0x07, 7 * math.Ldexp(1, -9)},
		{0x08, math.Ldexp(1, -6)}, {0x7e, 448}, {0x77, 240},
	}
	for _, c := range e4m3 {
		if got := E4M3ToF64(c.b); got != c.want {
			t.Errorf("E4M3ToF64(%#02x) = %v, want %v", c.b, got, c.want)
		}
	}
	if !math.IsNaN(E4M3ToF64(0x7f)) || !math.IsNaN(E4M3ToF64(0xff)) {
		t.Errorf("E4M3ToF64: 0x7f/0xff must be NaN")
	}
	for _, c := range []struct {
		h    uint16
		want float64
	}{{0x3f80, 1}, {0xc040, -3}, {0x3eab, 0.333984375}, {0x7f80, math.Inf(1)}} {
		if got := BF16ToF64(c.h); got != c.want {
			t.Errorf("BF16ToF64(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestF64(t *testing.T) {
	x := []float32{1.5, -0.1, float32(math.Inf(-1))}
	got := F64(x)
	want := []float64{1.5, float64(float32(-0.1)), math.Inf(-1)}
	if len(got) != len(want) {
		t.Fatalf("F64: %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("F64[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestRandIDs(t *testing.T) {
	t.Setenv(SeedEnv, "7")
	ids := RandIDs(Seeded(t), 2000, 5)
	if len(ids) != 2000 {
		t.Fatalf("%d ids, want 2000", len(ids))
	}
	var seen [5]int
	for i, id := range ids {
		if id < 0 || id >= 5 {
			t.Fatalf("id %d at %d outside [0,5)", id, i)
		}
		seen[id]++
	}
	for v, n := range seen {
		if n < 300 { // expected 400 each; 300 is > 5 standard deviations below
			t.Errorf("id %d drawn %d times of 2000", v, n)
		}
	}
}

// TestNoClockSeededTests guards "deterministic by default": no test file in
// the module seeds a random stream from the clock (use Seeded or Seed, which
// derive from the test's name and NINFER_TEST_SEED).
func TestNoClockSeededTests(t *testing.T) {
	root := "../.."
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	clockSeed := regexp.MustCompile(`time\.Now\(\)\.(UnixNano|Unix|UnixMicro|UnixMilli)\(\)|rand\.Seed\(|rand\.NewSource\(time`)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "internal/numtest/numtest_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(src), "\n") {
			if clockSeed.MatchString(line) {
				t.Errorf("%s:%d seeds from the clock (use numtest.Seeded/Seed): %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d test files under %s; the walk is broken", checked, root)
	}
}
