package layout

import "testing"

func TestSamplerBytes(t *testing.T) {
	for _, tc := range []struct {
		vocab int
		want  int64
	}{
		{1, 4 + 4 + 16},          // counts 4, seen 1 → 4, padded to 8, + pos + id
		{3, 12 + 4 + 16},         // 16 already 8-aligned
		{1000, 4000 + 1000 + 16}, // 5000 → 5000 (8-aligned)
		{1001, 4004 + 1004 + 16}, // 5008
		{248320, 1241616},
	} {
		if got := SamplerBytes(tc.vocab); got != tc.want {
			t.Errorf("SamplerBytes(%d) = %d, want %d", tc.vocab, got, tc.want)
		}
	}
}

func TestWithOpScratch(t *testing.T) {
	for _, tc := range []struct {
		phases, bytes int64
		off, capacity int64
		name          string
	}{
		{1024, 0, 0, 1024, ""},
		{1024, 1, 1024, 1280, OpScratchTerm},
		{1000, 300, 1024, 1536, OpScratchTerm},
	} {
		term, capacity := WithOpScratch(tc.phases, tc.bytes)
		if capacity != tc.capacity || term.Offset != tc.off || term.Name != tc.name || (tc.bytes > 0 && term.Bytes != tc.bytes) {
			t.Errorf("WithOpScratch(%d, %d) = %+v, %d; want offset %d capacity %d", tc.phases, tc.bytes, term, capacity, tc.off, tc.capacity)
		}
	}
}

// TestCUDAOpScratchTiny pins the needs of the tiny config to hand-computed
// sizes (nv 4, dk = dv 16, K 4, conv_dim 128, nh 2, hd 32, V 1000); the
// match with the kernels' requests is pkg/backend
// TestCUDAOpScratchMatchesLayout (-tags cudasim).
func TestCUDAOpScratchTiny(t *testing.T) {
	c := tiny()
	rec := int64(64*64 + 64*(16+16) + 64) // floats per (chunk, v-head)
	for _, tc := range []struct {
		T, rows                   int
		gdn, halo, att, smp, want int64
	}{
		{1, 1, 4 * rec * 4, 0, (128*1*2*32 + 2*128*2) * 4, 20256, 4 * rec * 4},
		{4, 4, 4 * rec * 4, 0, (128*4*2*32 + 2*128*8) * 4, 20256, (128*4*2*32 + 2*128*8) * 4},
		{65, 65, 2 * 4 * rec * 4, 2 * 3 * 128 * 4, (128*4*2*32 + 2*128*8) * 4, 20256, 2 * 4 * rec * 4},
		{128, 129, 2 * 4 * rec * 4, 2 * 3 * 128 * 4, (128*4*2*32 + 2*128*8) * 4, 20256, 2 * 4 * rec * 4},
	} {
		needs, bytes := CUDAOpScratch(c, tc.T, tc.rows)
		want := map[string]int64{"op_scratch.gdn_chunked": tc.gdn, "op_scratch.conv_halo": tc.halo,
			"op_scratch.attention_split": tc.att, "op_scratch.sample": tc.smp}
		if len(needs) != len(want) || bytes != tc.want {
			t.Errorf("T=%d: %d needs, %d bytes; want %d, %d", tc.T, len(needs), bytes, len(want), tc.want)
		}
		for _, n := range needs {
			if n.Bytes != want[n.Name] {
				t.Errorf("T=%d: %s = %d, want %d", tc.T, n.Name, n.Bytes, want[n.Name])
			}
		}
	}
}
