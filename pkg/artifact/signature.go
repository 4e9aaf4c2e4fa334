package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// SignatureImplementation is the "implementation" fact of the prefill
// signature; bump it when the prefill implementation changes in a way that
// invalidates calibrated costs.
const SignatureImplementation = "ninfer-qwen3_5-prefill-1"

// PrefillSignature returns the prefill signature of the artifact: a hash of
// the model structure and weight geometry, never of payload bytes. It needs
// a v3 artifact (v2 has no config).
func (f *File) PrefillSignature() (string, error) {
	cfg, err := f.Config()
	if err != nil {
		return "", err
	}
	return PrefillSignature(f.Architecture, cfg, f.Objects), nil
}

// PrefillSignature computes the lowercase hex SHA-256 of the canonical facts
// document (docs/FORMAT.md, "prefill_signature"):
//
//	{"architecture":A,"attention":[heads,kv_heads,head_dim],"ffn":[intermediate],
//	 "gdn":[conv_kernel,key_head_dim,value_head_dim,num_key_heads,num_value_heads],
//	 "hidden_size":H,"implementation":"ninfer-qwen3_5-prefill-1",
//	 "layer_types":[...],"num_hidden_layers":L,"rms_norm_eps":E,
//	 "rope":[theta,rotary_dim],"vocab_size":V,
//	 "weights":[{"format":F,"layout":Y,"name":N,"shape":[...]},...]}
//
// compact, keys sorted, weights = every tensor whose id starts with "text/",
// sorted by id; floats as strconv.FormatFloat(v, 'g', -1, 64).
func PrefillSignature(architecture string, cfg qwen35.Config, objects []Object) string {
	return signatureOf(SignatureFacts(architecture, cfg, objects))
}

func signatureOf(facts string) string {
	sum := sha256.Sum256([]byte(facts))
	return hex.EncodeToString(sum[:])
}

// SignatureFacts returns the canonical facts document that PrefillSignature
// hashes (useful for debugging a signature mismatch).
func SignatureFacts(architecture string, cfg qwen35.Config, objects []Object) string {
	var weights []*Object
	for i := range objects {
		o := &objects[i]
		if o.Kind == KindTensor && strings.HasPrefix(o.ID, "text/") {
			weights = append(weights, o)
		}
	}
	sort.Slice(weights, func(i, j int) bool { return weights[i].ID < weights[j].ID })
	var b strings.Builder
	ints := func(v ...int64) {
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(x, 10))
		}
		b.WriteByte(']')
	}
	b.WriteString(`{"architecture":`)
	b.WriteString(quote(architecture))
	b.WriteString(`,"attention":`)
	ints(int64(cfg.NumAttentionHeads), int64(cfg.NumKeyValueHeads), int64(cfg.HeadDim))
	b.WriteString(`,"ffn":`)
	ints(int64(cfg.IntermediateSize))
	b.WriteString(`,"gdn":`)
	ints(int64(cfg.LinearConvKernelDim), int64(cfg.LinearKeyHeadDim), int64(cfg.LinearValueHeadDim),
		int64(cfg.LinearNumKeyHeads), int64(cfg.LinearNumValueHeads))
	fmt.Fprintf(&b, `,"hidden_size":%d,"implementation":%s,"layer_types":[`, cfg.HiddenSize, quote(SignatureImplementation))
	for i, t := range cfg.LayerTypes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(t))
	}
	fmt.Fprintf(&b, `],"num_hidden_layers":%d,"rms_norm_eps":%s,"rope":[%s,%d],"vocab_size":%d,"weights":[`,
		cfg.NumHiddenLayers, fmtFloat(cfg.RMSNormEps), fmtFloat(cfg.RopeTheta), cfg.RotaryDim(), cfg.VocabSize)
	for i, o := range weights {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"format":%s,"layout":%s,"name":%s,"shape":`, quote(string(o.Format)), quote(string(o.Layout)), quote(o.ID))
		ints(o.Shape...)
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return b.String()
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// quote renders s as a JSON string: `"` and `\` are backslash-escaped,
// bytes below 0x20 become \u00XX, everything else is copied verbatim.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
