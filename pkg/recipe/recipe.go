// Package recipe holds the quantization recipes of ninfer-convert and
// ninfer-plan: each recipe maps every qwen35.Class to a storage format
// (pkg/format), with a stated fallback for tensors whose shape does not meet
// the format's constraints (format.CheckShape; e.g. nvfp4 needs N%128 == 0
// and K%64 == 0).
//
// Exact classes are fixed in every recipe: norms (ClassNorm) and the GDN
// depthwise conv (ClassConv) stay bf16, A_log/dt_bias (ClassControl) fp32,
// and the proposal-head id map (ClassDraftIDs) int32. The presets are
// documented in docs/PLAN.md.
package recipe

import (
	"fmt"
	"sort"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Rule is the format of one class: Format, or Fallback when the tensor's
// shape does not meet Format's constraints.
type Rule struct {
	Format   format.Format
	Fallback format.Format
}

// Recipe is a named class → format mapping.
type Recipe struct {
	Name        string
	Description string
	Rules       map[qwen35.Class]Rule
}

// fixed are the classes every recipe stores exactly.
var fixed = map[qwen35.Class]Rule{
	qwen35.ClassNorm:     {format.BF16, format.BF16},
	qwen35.ClassConv:     {format.BF16, format.BF16},
	qwen35.ClassControl:  {format.FP32, format.FP32},
	qwen35.ClassDraftIDs: {format.Int32, format.Int32},
}

// MatrixClasses lists the classes whose format a recipe chooses.
var MatrixClasses = []qwen35.Class{
	qwen35.ClassEmbedding, qwen35.ClassOutputHead,
	qwen35.ClassAttnQ, qwen35.ClassAttnK, qwen35.ClassAttnV, qwen35.ClassAttnO,
	qwen35.ClassGDNQKV, qwen35.ClassGDNZ, qwen35.ClassGDNA, qwen35.ClassGDNB, qwen35.ClassGDNOut,
	qwen35.ClassMLPGate, qwen35.ClassMLPUp, qwen35.ClassMLPDown,
	qwen35.ClassMTPFC, qwen35.ClassMTPMatrix, qwen35.ClassDraftHead,
}

func rule(f format.Format) Rule { return Rule{f, f} }

// build returns a recipe with the fixed classes, every matrix class set to
// base, then the given overrides.
func build(name, desc string, base Rule, over map[qwen35.Class]Rule) Recipe {
	r := Recipe{Name: name, Description: desc, Rules: map[qwen35.Class]Rule{}}
	for c, x := range fixed {
		r.Rules[c] = x
	}
	for _, c := range MatrixClasses {
		r.Rules[c] = base
	}
	for c, x := range over {
		r.Rules[c] = x
	}
	return r
}

// groupwiseInt is the ninfer 27B recipe adapted to our fused tensors.
var groupwiseInt = map[qwen35.Class]Rule{
	qwen35.ClassEmbedding:  rule(format.Q6G64),
	qwen35.ClassOutputHead: rule(format.Q6G64),
	qwen35.ClassAttnQ:      rule(format.Q5G64), // query+gate rows: upstream Q q4 / gate q5
	qwen35.ClassAttnK:      rule(format.Q4G64),
	qwen35.ClassAttnV:      rule(format.Q5G64),
	qwen35.ClassAttnO:      rule(format.Q5G64),
	qwen35.ClassGDNQKV:     rule(format.Q5G64), // q|k|v rows: upstream q,k q4 / v q5
	qwen35.ClassGDNZ:       rule(format.Q5G64),
	qwen35.ClassGDNA:       rule(format.BF16),
	qwen35.ClassGDNB:       rule(format.BF16),
	qwen35.ClassGDNOut:     rule(format.Q5G64),
	qwen35.ClassMLPGate:    rule(format.Q4G64),
	qwen35.ClassMLPUp:      rule(format.Q4G64),
	qwen35.ClassMLPDown:    rule(format.Q5G64),
	qwen35.ClassMTPFC:      rule(format.Q8G32),
	qwen35.ClassMTPMatrix:  rule(format.Q8G32),
	qwen35.ClassDraftHead:  {format.Q4G64, format.Q8G32},
}

func with(base map[qwen35.Class]Rule, over map[qwen35.Class]Rule) map[qwen35.Class]Rule {
	out := map[qwen35.Class]Rule{}
	for c, x := range base {
		out[c] = x
	}
	for c, x := range over {
		out[c] = x
	}
	return out
}

var presets = []Recipe{
	build("bf16", "every matrix bf16 (unquantized reference)", rule(format.BF16),
		map[qwen35.Class]Rule{qwen35.ClassDraftHead: {format.Q4G64, format.Q8G32}}),
	build("q8", "every large matrix q8_g32_fp16; GDN in_proj_a/in_proj_b bf16", rule(format.Q8G32),
		map[qwen35.Class]Rule{qwen35.ClassGDNA: rule(format.BF16), qwen35.ClassGDNB: rule(format.BF16),
			qwen35.ClassDraftHead: {format.Q4G64, format.Q8G32}}),
	build("groupwise-int", "ninfer 27B recipe: embedding/head q6, K and MLP gate/up q4, other matrices q5, MTP q8",
		rule(format.BF16), groupwiseInt),
	build("nvfp4-mlp", "groupwise-int with MLP gate/up/down nvfp4 (fallback q4 gate/up, q5 down)",
		rule(format.BF16), with(groupwiseInt, map[qwen35.Class]Rule{
			qwen35.ClassMLPGate: {format.NVFP4, format.Q4G64},
			qwen35.ClassMLPUp:   {format.NVFP4, format.Q4G64},
			qwen35.ClassMLPDown: {format.NVFP4, format.Q5G64},
		})),
	build("fp8", "every large matrix fp8_e4m3fn_row_bf16; GDN in_proj_a/in_proj_b bf16", rule(format.FP8Row),
		map[qwen35.Class]Rule{qwen35.ClassGDNA: rule(format.BF16), qwen35.ClassGDNB: rule(format.BF16),
			qwen35.ClassDraftHead: {format.Q4G64, format.Q8G32}}),
	build("fp32", "every tensor fp32, norms and conv included (exact reference path for tests)", rule(format.FP32),
		map[qwen35.Class]Rule{qwen35.ClassNorm: rule(format.FP32), qwen35.ClassConv: rule(format.FP32),
			qwen35.ClassDraftHead: rule(format.FP32)}),
}

// Names returns the preset names in a stable order.
func Names() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.Name
	}
	return out
}

// Lookup returns the preset recipe of the given name.
func Lookup(name string) (Recipe, error) {
	for _, p := range presets {
		if p.Name == name {
			return p, nil
		}
	}
	return Recipe{}, fmt.Errorf("unknown recipe %q (known: %v)", name, Names())
}

// Validate checks that r has a rule for every class, the fixed classes keep
// their exact formats, and every format name is known.
func (r Recipe) Validate() error {
	for c, want := range fixed {
		if got := r.Rules[c]; got != want {
			return fmt.Errorf("recipe %s: class %s must be %s, got %s", r.Name, c, want.Format, got.Format)
		}
	}
	for _, c := range MatrixClasses {
		x, ok := r.Rules[c]
		if !ok {
			return fmt.Errorf("recipe %s: no rule for class %s", r.Name, c)
		}
		for _, f := range []format.Format{x.Format, x.Fallback} {
			if _, err := format.Parse(string(f)); err != nil {
				return fmt.Errorf("recipe %s: class %s: %w", r.Name, c, err)
			}
		}
	}
	return nil
}

// FormatFor returns the format of tensor t: the class's format if t's shape
// meets its constraints, else the class's fallback (fellBack true, reason
// naming the failed constraint), else bf16 as a last resort.
func (r Recipe) FormatFor(t qwen35.Tensor) (f format.Format, fellBack bool, reason string) {
	x, ok := r.Rules[t.Class]
	if !ok {
		return format.BF16, true, fmt.Sprintf("recipe %s has no rule for class %q; stored bf16", r.Name, t.Class)
	}
	err := format.CheckShape(x.Format, t.Shape)
	if err == nil {
		return x.Format, false, ""
	}
	reason = fmt.Sprintf("%s: %v", x.Format, err)
	if x.Fallback != x.Format && format.CheckShape(x.Fallback, t.Shape) == nil {
		return x.Fallback, true, reason + "; fell back to " + string(x.Fallback)
	}
	return format.BF16, true, reason + "; stored bf16"
}

// Assignment is the format and exact encoded size chosen for one tensor.
type Assignment struct {
	Tensor   qwen35.Tensor
	Format   format.Format
	Bytes    int64
	FellBack bool
	Reason   string
}

// Assign chooses the format of every tensor and computes its encoded size.
func (r Recipe) Assign(tensors []qwen35.Tensor) ([]Assignment, error) {
	out := make([]Assignment, 0, len(tensors))
	for _, t := range tensors {
		f, fb, why := r.FormatFor(t)
		n, err := format.EncodedSize(f, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("recipe %s: object %s: %w", r.Name, t.Name, err)
		}
		out = append(out, Assignment{Tensor: t, Format: f, Bytes: n, FellBack: fb, Reason: why})
	}
	return out, nil
}

// ProposalRows is the row count of the reduced-vocabulary proposal head
// (text/draft_head); a model with a smaller vocabulary uses every row.
const ProposalRows = 131072

// ProposalTensors returns the two objects of the optimized proposal head
// (component "proposal"): text/draft_head [min(131072, vocab), hidden] and
// text/draft_head_token_ids [rows] int32. They are not part of
// qwen35.Config.Tensors(); the converter adds them when asked to.
func ProposalTensors(c qwen35.Config) []qwen35.Tensor {
	rows := int64(ProposalRows)
	if int64(c.VocabSize) < rows {
		rows = int64(c.VocabSize)
	}
	return []qwen35.Tensor{
		{Name: qwen35.NameDraftHead, Shape: []int64{rows, int64(c.HiddenSize)}, HFShape: []int64{rows, int64(c.HiddenSize)},
			Class: qwen35.ClassDraftHead, Component: qwen35.ComponentProposal},
		{Name: qwen35.NameDraftIDs, Shape: []int64{rows}, HFShape: []int64{rows},
			Class: qwen35.ClassDraftIDs, Component: qwen35.ComponentProposal},
	}
}

// Formats returns the sorted unique formats of a set of assignments (the
// load.formats list of a bench report).
func Formats(as []Assignment) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range as {
		if !seen[string(a.Format)] {
			seen[string(a.Format)] = true
			out = append(out, string(a.Format))
		}
	}
	sort.Strings(out)
	return out
}
