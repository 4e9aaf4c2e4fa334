package qwen35

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseHFConfig fuzzes the Hugging Face config.json reader (go test
// ./pkg/qwen35 -run '^$' -fuzz FuzzParseHFConfig -fuzztime 10m -parallel 1;
// make fuzz).

// decodeStored decodes a config the way the artifact reader decodes
// components.text.config: strict members, then Validate.
func decodeStored(b []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// sameConfig compares configs treating an empty and a nil slice alike
// (omitempty writes neither).
func sameConfig(a, b Config) bool {
	for _, c := range []*Config{&a, &b} {
		if len(c.MRopeSection) == 0 {
			c.MRopeSection = nil
		}
		if len(c.EOSTokenIDs) == 0 {
			c.EOSTokenIDs = nil
		}
	}
	return reflect.DeepEqual(a, b)
}

// checkInventory asserts that an accepted config describes tensors that can
// be sized: every dimension positive, every element count within
// MaxTensorElements, and no more tensors than the layer counts imply.
func checkInventory(t *testing.T, c Config) {
	t.Helper()
	if c.NumHiddenLayers > MaxLayers || c.MTPNumHiddenLayers > MaxLayers {
		t.Fatalf("accepted %d layers and %d MTP layers (max %d)", c.NumHiddenLayers, c.MTPNumHiddenLayers, MaxLayers)
	}
	ts := c.Tensors()
	if max := 3 + 14*c.NumHiddenLayers + 4 + 13*c.MTPNumHiddenLayers; len(ts) > max {
		t.Fatalf("%d tensors for %d+%d layers", len(ts), c.NumHiddenLayers, c.MTPNumHiddenLayers)
	}
	for _, tn := range ts {
		n := int64(1)
		for _, d := range tn.Shape {
			if d <= 0 || n > math.MaxInt64/d {
				t.Fatalf("tensor %s has shape %v (%v): a dimension is not positive or the size overflows", tn.Name, tn.Shape, tn.Dims)
			}
			n *= d
		}
		if n > MaxTensorElements {
			t.Fatalf("tensor %s has %d elements, more than %d", tn.Name, n, int64(MaxTensorElements))
		}
	}
}

func fuzzConfigSeeds(tb testing.TB) [][]byte {
	seeds := [][]byte{[]byte(cfg27B), []byte(cfg9B), []byte(minimal("")),
		[]byte(minimal(`,"layer_types":null,"full_attention_interval":2,"rope_scaling":{"rope_type":"mrope","mrope_section":[]},"eos_token_id":[]`)),
		[]byte(minimal(`,"rope_parameters":{"rope_theta":null}`)),
		[]byte(`{"architectures":["Qwen3_5ForConditionalGeneration"],"text_config":{}}`),
		[]byte(`{"model_type":"qwen3_5_text"}`),
		[]byte(`{"architectures":[]}`),
	}
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "golden", "*", "config.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

// FuzzParseHFConfig checks ParseHFConfigDefaults on arbitrary bytes: it is
// deterministic; an error is one line starting with "config.json: " or
// "config: "; an accepted config validates, has a tensor inventory that can
// be sized (checkInventory), lists each default once, and survives the trip
// into an artifact: json.Marshal and the artifact's strict decode give the
// same config back.
func FuzzParseHFConfig(f *testing.F) {
	for _, s := range fuzzConfigSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, layout, defs, err := ParseHFConfigDefaults(data)
		c2, layout2, defs2, err2 := ParseHFConfigDefaults(data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) ||
			!reflect.DeepEqual(c, c2) || layout != layout2 || !reflect.DeepEqual(defs, defs2) {
			t.Fatalf("ParseHFConfigDefaults is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || !(strings.HasPrefix(msg, "config.json: ") || strings.HasPrefix(msg, "config: ")) {
				t.Fatalf("error is not one line naming config.json: %q", msg)
			}
			return
		}
		if layout != LayoutCausalLM && layout != LayoutMultimodal {
			t.Fatalf("layout %d", layout)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		seen := map[string]bool{}
		for _, d := range defs {
			if seen[d.Field] {
				t.Fatalf("default %s listed twice: %v", d.Field, defs)
			}
			seen[d.Field] = true
		}
		checkInventory(t, c)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted config does not marshal: %v", err)
		}
		back, err := decodeStored(b)
		if err != nil {
			t.Fatalf("stored config is rejected: %v\n%s", err, b)
		}
		if !sameConfig(c, back) {
			t.Fatalf("config changed through its stored form:\n%+v\n%+v", c, back)
		}
	})
}
