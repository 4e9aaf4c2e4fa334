package layout

import "github.com/ninfer/ninfer/pkg/qwen35"

// Workspace phases (see the package doc).
const (
	PhaseAttention = "attention"
	PhaseGDN       = "gdn"
	PhaseMLP       = "mlp"
	PhaseLogits    = "logits"
)

// Workspace returns the workspace phases of one step of T tokens with
// logitRows rows of logits, each laid out from offset 0 in the order the
// forward pass allocates, and the workspace capacity (the largest phase).
// Every buffer is fp32 [T, cols].
func Workspace(c qwen35.Config, T, logitRows int) ([]Arena, int64) {
	f := func(name string, rows, cols int) Term { return Term{Name: name, Bytes: 4 * int64(rows) * int64(cols)} }
	H, hd, nh, nkv := c.HiddenSize, c.HeadDim, c.NumAttentionHeads, c.NumKeyValueHeads
	nv, cd, vd := c.LinearNumValueHeads, c.ConvDim(), c.ValueDim()
	base := func() []Term { return []Term{f("x", T, H), f("x_norm", T, H)} }
	var phases []Arena
	add := func(name string, terms ...Term) { phases = append(phases, Lay(name, append(base(), terms...))) }
	if len(c.FullLayers()) > 0 {
		add(PhaseAttention, f("attn.q_gate", T, 2*nh*hd), f("attn.q", T, nh*hd), f("attn.k", T, nkv*hd),
			f("attn.v", T, nkv*hd), f("attn.out", T, nh*hd))
	}
	if len(c.LinearLayers()) > 0 {
		add(PhaseGDN, f("gdn.qkv", T, cd), f("gdn.conv_out", T, cd), f("gdn.z", T, vd), f("gdn.a", T, nv),
			f("gdn.b", T, nv), f("gdn.g", T, nv), f("gdn.beta", T, nv), f("gdn.o", T, vd), f("gdn.o_norm", T, vd))
	}
	add(PhaseMLP, f("mlp.gate", T, c.IntermediateSize), f("mlp.up", T, c.IntermediateSize))
	add(PhaseLogits, f("logits", logitRows, c.VocabSize))
	var capacity int64
	for _, p := range phases {
		capacity = max(capacity, p.Capacity)
	}
	return phases, capacity
}
