package cpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMultiRowBodiesPrefetch: the multi-row GEMVs owe their speed to the
// software prefetch of the rows ahead (docs/PERF.md), which no value test
// can see: a shared helper once compiled to no prefetch instruction at all
// and decode ran 30 % slower with every output unchanged. This compiles
// the kernel files with the package's cgo flags (#cgo CFLAGS in cpu.go)
// and requires prefetcht0 in each multi-row body's machine code (GNU
// objdump ≥ 2.32; skipped without a C compiler or objdump).
func TestMultiRowBodiesPrefetch(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the kernels (-short)")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	objdump, err := exec.LookPath("objdump")
	if _, ccErr := exec.LookPath(cc); err != nil || ccErr != nil {
		t.Skipf("needs %s and objdump", cc)
	}
	cases := []struct{ src, sym string }{
		{"avx2.c", "ni_q8p_rows_vnni_vbmi"},
		{"avx2.c", "ni_q8_rows_avx2"},
		{"avx512.c", "ni_dot_q8_rows_avx512"},
		{"avx2.c", "ni_q8u_rows_avx2"},
		// the NT-token int8 bodies at 2–16 tokens (twelfth session)
		{"avx2.c", "ni_q8u_groups_multi_avx2"},
		{"avx2.c", "ni_q8u_groups_multi_avxvnni"},
		{"avx2.c", "ni_q8p_groups_multi_vnni"},
		{"avx2.c", "ni_q8p_groups_multi_vnni_vbmi"},
		{"avx2.c", "ni_q8w_multi_vnni"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		obj := filepath.Join(dir, strings.TrimSuffix(c.src, ".c")+".o")
		if _, err := os.Stat(obj); err != nil {
			cmd := exec.Command(cc, "-O3", "-march=x86-64-v2", "-std=gnu11", "-I..", "-c", c.src, "-o", obj)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s -c %s: %v\n%s", cc, c.src, err, out)
			}
		}
		out, err := exec.Command(objdump, "-d", "--no-show-raw-insn", "--disassemble="+c.sym, obj).Output()
		if err != nil {
			t.Skipf("objdump --disassemble=%s: %v (binutils < 2.32?)", c.sym, err)
		}
		text := string(out)
		if !strings.Contains(text, "<"+c.sym+">:") {
			t.Fatalf("%s: symbol not in %s", c.sym, c.src)
		}
		if strings.Count(text, "prefetcht0") == 0 {
			t.Errorf("%s (%s): no prefetcht0 in the compiled body: the prefetch of the rows ahead was optimised away", c.sym, c.src)
		}
	}
}

// TestPrefetchOffsetsEachLineOnce: over consecutive steps, the multi-row
// GEMVs' prefetch names every cache line of the rows ahead once, in
// increasing order: the multiples of 64 below steps·length (the lengths a
// pass of 1–4 rows consumes per step of each plane: base 32 or 64 bytes a
// row, q5/q6 high 8 or 16, scales 2 or 4).
func TestPrefetchOffsetsEachLineOnce(t *testing.T) {
	const steps = 37
	for _, length := range []int64{2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256} {
		var got []int64
		for s := int64(0); s < steps; s++ {
			got = append(got, prefetchOffsets(s, length)...)
		}
		var want []int64
		for o := int64(0); o < steps*length; o += 64 {
			want = append(want, o)
		}
		if len(got) != len(want) {
			t.Errorf("length %d: %d offsets over %d steps, want %d: %v", length, len(got), steps, len(want), got)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("length %d: offset %d is %d, want %d", length, i, got[i], want[i])
				break
			}
		}
	}
}
