package qwen35

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseErrorsQuoteUntrustedStrings feeds config.json string values
// holding terminal escapes, or 100,000 bytes long, through ParseHFConfig: the
// error must stay one short inert line.
func TestParseErrorsQuoteUntrustedStrings(t *testing.T) {
	const ctrl = "\x1b[31mred\x07"
	long := strings.Repeat("n", 100_000)
	const ctrlQ, longQ = `"\x1b[31mred\a"`, "(100000 bytes)"
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	arch := func(s string) string {
		return strings.Replace(cfg9B, `"architectures":["Qwen3_5ForCausalLM"]`, `"architectures":[`+js(s)+`]`, 1)
	}
	modelType := func(s string) string {
		c := strings.Replace(cfg9B, `"architectures":["Qwen3_5ForCausalLM"],`, ``, 1)
		return strings.Replace(c, `"model_type":"qwen3_5_text"`, `"model_type":`+js(s), 1)
	}
	act := func(s string) string { return minimal(`,"hidden_act":` + js(s)) }
	rope := func(s string) string { return minimal(`,"rope_parameters":{"rope_type":` + js(s) + `}`) }
	legacyRope := func(s string) string { return minimal(`,"rope_scaling":{"type":` + js(s) + `}`) }
	layers := func(s string) string {
		return minimal(`,"layer_types":["linear_attention","linear_attention",` + js(s) + `,"full_attention"]`)
	}
	cases := []struct {
		name, config, want string
	}{
		{"ctrl_architecture", arch(ctrl), ctrlQ},
		{"long_architecture", arch(long), longQ},
		{"ctrl_model_type", modelType(ctrl), `"model_type \x1b[31mred\a"`},
		{"long_model_type", modelType(long), "(100011 bytes)"},
		{"ctrl_hidden_act", act(ctrl), ctrlQ},
		{"long_hidden_act", act(long), longQ},
		{"ctrl_rope_type", rope(ctrl), ctrlQ},
		{"long_rope_type", rope(long), longQ},
		{"ctrl_legacy_rope_type", legacyRope(ctrl), ctrlQ},
		{"long_legacy_rope_type", legacyRope(long), longQ},
		{"ctrl_layer_type", layers(ctrl), ctrlQ},
		{"long_layer_type", layers(long), longQ},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ParseHFConfig([]byte(c.config))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for i := 0; i < len(msg); i++ {
				if b := msg[i]; b < 0x20 || b == 0x7f {
					t.Fatalf("error holds control byte %#x at %d: %q", b, i, msg)
				}
			}
			if len(msg) >= 1024 {
				t.Fatalf("error is %d bytes long: %.200q…", len(msg), msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not contain %q", msg, c.want)
			}
		})
	}
}
