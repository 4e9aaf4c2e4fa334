package layout

import "github.com/ninfer/ninfer/pkg/qwen35"

// OpScratchTerm is the name of the workspace's op-scratch term: the device
// scratch of the CUDA backend's ops, after the phases (see the package doc).
const OpScratchTerm = "op_scratch"

// The CUDA kernels' scratch geometry (kernels/cuda; checked against the
// launchers' dry run by pkg/backend TestCUDAOpScratchMatchesLayout).
const (
	cudaGDNChunk         = 64        // delta.cuh NI_GDN_CHUNK
	cudaGDNChunkDKMax    = 128       // delta.cuh NI_GDN_CK_DK_MAX: larger dk runs the recurrent kernel
	cudaGDNScratchBudget = 128 << 20 // delta.cu NI_GDN_SCRATCH_BUDGET: chunk records per segment
	cudaConvChunk        = 64        // elementwise.cuh NI_CONV_CHUNK
	cudaAttSplitMaxT     = 4         // attention.cuh ATT_SPLIT_MAX_T: split-KV decode for T ≤ 4
	cudaAttSplitMax      = 128       // attention.cuh ATT_SPLIT_MAX: most splits
)

// CUDAOpScratch is the op scratch of the CUDA backend for steps of up to T
// tokens whose attention calls have up to attnRows query rows (the target
// step's T; with MTP, the larger of T and the MTP step's rows). The ops run
// one after another on one stream and share the region, so its size is the
// largest need; needs lists each op's (fp32 unless said):
//
//	op_scratch.gdn_chunked      seg·nv·rec·4, rec = 64² + 64·(⌈dk⌉₄ + ⌈dv⌉₄) + 64 floats per
//	                            (chunk, v-head), seg = min(⌈T/64⌉, max(1, ⌊128 MiB / (nv·rec·4)⌋))
//	                            chunks per segment (0 when dk > 128: the recurrent kernel)
//	op_scratch.conv_halo        ⌈T/64⌉·(K−1)·conv_dim·4 when T > 64 (the window before each chunk)
//	op_scratch.attention_split  (⌈128·R·hd⌉₆₄ + 2·128·R)·4, R = min(4, attnRows)·heads: the
//	                            accumulators and (m, l) of up to 128 KV splits (the cap is
//	                            device-independent; the SM count only lowers the splits used)
//	op_scratch.sample           20·vocab + 256 bytes (float64 logits and cumulative
//	                            probabilities, int32 candidate ids)
//
// The need is an upper bound of what the launchers ask for: a smaller
// device (fewer SMs, shorter context, a chunked GDN kernel that does not fit
// its shared memory) asks for less, never more.
func CUDAOpScratch(c qwen35.Config, T, attnRows int) (needs []Term, bytes int64) {
	add := func(name string, b int64) {
		needs = append(needs, Term{Name: name, Bytes: b})
		bytes = max(bytes, b)
	}
	ceil := func(a, b int64) int64 { return (a + b - 1) / b }
	round := func(a, b int64) int64 { return ceil(a, b) * b }
	t := int64(max(T, 0))
	if len(c.LinearLayers()) > 0 {
		var gdn int64
		if dk, dv := int64(c.LinearKeyHeadDim), int64(c.LinearValueHeadDim); dk <= cudaGDNChunkDKMax && t > 0 {
			rec := int64(cudaGDNChunk*cudaGDNChunk) + cudaGDNChunk*(round(dk, 4)+round(dv, 4)) + cudaGDNChunk
			chunk := 4 * rec * int64(c.LinearNumValueHeads)
			seg := min(ceil(t, cudaGDNChunk), max(1, cudaGDNScratchBudget/chunk))
			gdn = seg * chunk
		}
		add("op_scratch.gdn_chunked", gdn)
		var halo int64
		if sw := int64(c.LinearConvKernelDim - 1); t > cudaConvChunk && sw > 0 {
			halo = ceil(t, cudaConvChunk) * sw * int64(c.ConvDim()) * 4
		}
		add("op_scratch.conv_halo", halo)
	}
	if len(c.FullLayers()) > 0 || c.MTPNumHiddenLayers > 0 {
		var att int64
		if r := int64(min(attnRows, cudaAttSplitMaxT)) * int64(c.NumAttentionHeads); r > 0 {
			att = (round(cudaAttSplitMax*r*int64(c.HeadDim), 64) + 2*cudaAttSplitMax*r) * 4
		}
		add("op_scratch.attention_split", att)
	}
	add("op_scratch.sample", 20*int64(c.VocabSize)+256)
	return needs, bytes
}

// WithOpScratch appends the op-scratch term of bytes to a workspace whose
// phases need phaseCap bytes: it starts at AlignUp(phaseCap) and the
// workspace capacity becomes that plus AlignUp(bytes). bytes ≤ 0 leaves
// the workspace as it is (backends without op scratch: the CPU).
func WithOpScratch(phaseCap, bytes int64) (term Term, capacity int64) {
	if bytes <= 0 {
		return Term{}, phaseCap
	}
	off := AlignUp(phaseCap)
	return Term{Name: OpScratchTerm, Offset: off, Bytes: bytes}, off + AlignUp(bytes)
}
