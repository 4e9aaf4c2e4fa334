//go:build cudasim && !cuda

package backend_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/ninfer/ninfer/kernels/cuda"
	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// opScratchNeed is the named need of layout.CUDAOpScratch.
func opScratchNeed(tb testing.TB, c qwen35.Config, T, attnRows int, name string) int64 {
	tb.Helper()
	needs, _ := layout.CUDAOpScratch(c, T, attnRows)
	for _, n := range needs {
		if n.Name == name {
			return n.Bytes
		}
	}
	tb.Fatalf("layout.CUDAOpScratch has no need %s", name)
	return 0
}

// TestCUDAOpScratchMatchesLayout checks the Go formula the engine and
// ninfer-plan reserve (layout.CUDAOpScratch) against what the launchers
// ask ni_cuda_scratch for, in dry runs on the 27B, 0.8B and an odd-sized
// config, at the route edges (T = 1..4 split-KV decode, 5, 64, 65, chunk
// multiples and ragged tails, a full prefill chunk): with SM count high
// enough that the split count reaches its device-independent cap, each
// op's request equals the formula exactly (attention: once the table holds
// 128 splits of 64 positions); on H200 and sm_89 facts and short contexts
// it never exceeds it.
func TestCUDAOpScratchMatchesLayout(t *testing.T) {
	odd := parseGeomConfig(t, `{"architectures":["Qwen3_5ForConditionalGeneration"],"model_type":"qwen3_5","tie_word_embeddings":true,
 "text_config":{"model_type":"qwen3_5_text","vocab_size":1003,"hidden_size":96,"num_hidden_layers":4,
  "intermediate_size":160,"num_attention_heads":6,"num_key_value_heads":2,"head_dim":40,"hidden_act":"silu",
  "linear_conv_kernel_dim":3,"linear_key_head_dim":20,"linear_value_head_dim":28,"linear_num_key_heads":2,
  "linear_num_value_heads":6,"full_attention_interval":4,"rms_norm_eps":1e-6,"attn_output_gate":true,
  "mtp_num_hidden_layers":1,"max_position_embeddings":4096,"eos_token_id":1,
  "rope_parameters":{"rope_type":"default","rope_theta":10000000,"partial_rotary_factor":0.25,
   "mrope_section":[2,2,1],"mrope_interleaved":true}}}`)
	ctx := newDryCtx(t)
	facts := []struct {
		name  string
		sms   int
		optin int64
		exact bool
	}{{"cap", 1 << 20, h200Optin, true}, {"H200", h200SMs, h200Optin, false}, {"sm_89", sm89SMs, sm89Optin, false}}
	for _, mc := range []struct {
		name string
		cfg  qwen35.Config
	}{{"27B", parseGeomConfig(t, geomCfg27B)}, {"0.8B", parseGeomConfig(t, geomCfg08B)}, {"odd", odd}} {
		c := mc.cfg
		mem := newFakeMem()
		for _, maxCtx := range []int{64, 4096, 262144} {
			s := (&model{cfg: c, mem: mem, slots: geomSlots}).newSeq(t, maxCtx, backend.KVBF16)
			for _, T := range []int{1, 2, 3, 4, 5, 64, 65, 127, 1000, 2048} {
				for _, f := range facts {
					where := fmt.Sprintf("%s %s ctx %d T=%d", mc.name, f.name, maxCtx, T)
					request := func(op string, run func()) int64 {
						if err := ctx.DryRun(true, f.sms, f.optin); err != nil {
							t.Fatal(err)
						}
						run()
						got := ctx.ScratchBytes()
						if _, err := ctx.Sync(); err != nil {
							t.Errorf("%s %s: %v", where, op, err)
						}
						return got
					}
					check := func(op string, got, want int64) {
						if got > want || (f.exact && got != want) || want < 0 {
							t.Errorf("%s: %s asks for %d bytes of op scratch, layout.CUDAOpScratch reserves %d", where, op, got, want)
						}
					}
					// GDN: the chunked form at T (the engine's prefill), its
					// conv at T; the state slot is the last one.
					nk, nv, dk, dv := c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
					q := heads(mem.alloc(4*int64(T*nk*dk)), T, nk, dk)
					k := heads(mem.alloc(4*int64(T*nk*dk)), T, nk, dk)
					v := heads(mem.alloc(4*int64(T*nv*dv)), T, nv, dv)
					g := heads(mem.alloc(4*int64(T*nv)), T, nv, 1)
					beta := heads(mem.alloc(4*int64(T*nv)), T, nv, 1)
					o := heads(mem.alloc(4*int64(T*nv*dv)), T, nv, dv)
					got := request("gdn_chunked", func() {
						ctx.DeltaChunked(q.c(), k.c(), v.c(), g.c(), beta.c(), s.ssm.ptr(), s.ssmStride, geomSlots, s.inSlot.ptr(), 0, o.c())
					})
					check("gdn_chunked", got, opScratchNeed(t, c, T, T, "op_scratch.gdn_chunked"))
					C := c.ConvDim()
					x, y := dense(mem.alloc(4*int64(T*C)), T, C), dense(mem.alloc(4*int64(T*C)), T, C)
					w := mem.alloc(4 * int64(C*c.LinearConvKernelDim))
					got = request("conv1d", func() {
						ctx.Conv1DSiLU(x.c(), y.c(), w.ptr(), c.LinearConvKernelDim, s.conv.ptr(), false, s.convStep, geomSlots, s.inSlot.ptr(), 0)
					})
					check("conv1d", got, opScratchNeed(t, c, T, T, "op_scratch.conv_halo"))
					// Attention of T query rows (split-KV for T ≤ 4).
					nh, hd := c.NumAttentionHeads, c.HeadDim
					aq := heads(mem.alloc(4*int64(T*nh*hd)), T, nh, hd)
					ao := heads(mem.alloc(4*int64(T*nh*hd)), T, nh, hd)
					got = request("attention", func() {
						ctx.Attention(aq.c(), s.kv, s.pos.ptr(), float32(1/math.Sqrt(float64(hd))), ao.c())
					})
					want := opScratchNeed(t, c, T, T, "op_scratch.attention_split")
					if T > 4 || maxCtx <= 64 { // no split: route (b), or a one-page table
						if got != 0 {
							t.Errorf("%s: attention without splits asks for %d bytes of op scratch", where, got)
						}
					} else if got > want || (f.exact && maxCtx >= 128*64 && got != want) {
						// exact when the table holds 128 splits of 64 positions
						t.Errorf("%s: attention asks for %d bytes of op scratch, layout.CUDAOpScratch reserves %d", where, got, want)
					}
					if T == 1 {
						V := c.VocabSize
						lg := dense(mem.alloc(4*int64(V)), 1, V)
						st := mem.alloc(backend.SamplerStateBytes(V))
						got = request("sample", func() {
							ctx.Sample(lg.c(), mem.alloc(8).ptr(), st.ptr(), (st + addr(4*V)).ptr(), cuda.SampleConfig{Temperature: 1, TopP: 1}, mem.alloc(8).ptr())
						})
						check("sample", got, opScratchNeed(t, c, T, T, "op_scratch.sample"))
					}
				}
			}
		}
	}
	if err := ctx.DryRun(false, 0, 0); err != nil {
		t.Fatal(err)
	}
}
