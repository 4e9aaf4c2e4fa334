package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// FuzzTextConfig fuzzes the artifact's reader of the directory's
// components member, which holds components.text.config (the model config a
// .ninfer stores), on its own, where FuzzOpen reaches it only through a
// whole container: go test ./pkg/artifact -run '^$' -fuzz FuzzTextConfig
// -fuzztime 10m -parallel 1 (make fuzz).

// componentsWith is a v3 components member around a config text (mtp:
// the num_layers member, or "" for none).
func componentsWith(cfg []byte, mtp string) []byte {
	b := append(append([]byte(`{"text":{"config":`), cfg...), `,"resources":["frontend/tokenizer.json"]}`...)
	if mtp != "" {
		b = append(b, `,"mtp":{"num_layers":`+mtp+`}`...)
	}
	return append(b, `,"proposal":{"rows":64,"source":"test"}}`...)
}

func parseTextConfig(components []byte) (*File, error) {
	f := &File{Path: "fuzz.ninfer"}
	return f, f.parseComponents(components)
}

// FuzzTextConfig checks parseComponents on arbitrary bytes: it is
// deterministic; an error is a one-line ErrInvalid naming the file; an
// accepted config validates, its tensor inventory can be sized (layer
// counts within qwen35.MaxLayers, positive dimensions, element counts within
// qwen35.MaxTensorElements), and the writer's encoding of it (json.Marshal,
// as encodeDirectory does) reads back as the same config.
func FuzzTextConfig(f *testing.F) {
	good, err := json.Marshal(testConfig())
	if err != nil {
		f.Fatal(err)
	}
	noMTP := bytes.Replace(good, []byte(`"mtp_num_hidden_layers":1`), []byte(`"mtp_num_hidden_layers":0`), 1)
	f.Add(componentsWith(good, "1"))
	f.Add(componentsWith(noMTP, ""))
	f.Add(componentsWith(bytes.Replace(good, []byte(`"eos_token_ids":[1,2]`), []byte(`"eos_token_ids":[],"bos_token_id":0,"mrope_section":[11,11,10]`), 1), "1"))
	f.Add(componentsWith(bytes.Replace(good, []byte(`"vocab_size":256`), []byte(`"vocab_size":256,"extra":1`), 1), "1"))
	f.Add(componentsWith(bytes.Replace(noMTP, []byte(`"num_hidden_layers":2`), []byte(`"num_hidden_layers":2000`), 1), ""))
	f.Add(componentsWith(bytes.Replace(good, []byte(`"hidden_size":64`), []byte(`"hidden_size":4611686018427387904`), 1), "1"))
	f.Add(componentsWith(bytes.Replace(good, []byte(`"mtp_num_hidden_layers":1`), []byte(`"mtp_num_hidden_layers":100000000`), 1), "100000000"))
	f.Add(componentsWith([]byte(`{}`), ""))
	f.Add([]byte(`{"text":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// What parseComponents gets from splitDocument and parseObject:
		// one valid JSON value of a UTF-8 directory, without surrounding
		// whitespace.
		if !utf8.Valid(data) || !json.Valid(data) {
			return
		}
		data = bytes.Trim(data, " \t\r\n")
		f1, err := parseTextConfig(data)
		f2, err2 := parseTextConfig(data)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(f1.config, f2.config) {
			t.Fatalf("parseComponents is not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) || strings.ContainsAny(err.Error(), "\n\r") || !strings.HasPrefix(err.Error(), "fuzz.ninfer: ") {
				t.Fatalf("error is not a one-line ErrInvalid naming the file: %q", err)
			}
			return
		}
		c := *f1.config
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		if c.NumHiddenLayers > qwen35.MaxLayers || c.MTPNumHiddenLayers > qwen35.MaxLayers {
			t.Fatalf("accepted %d layers, %d MTP layers", c.NumHiddenLayers, c.MTPNumHiddenLayers)
		}
		for _, tn := range c.Tensors() {
			n := int64(1)
			for _, d := range tn.Shape {
				if d <= 0 || n > qwen35.MaxTensorElements/d {
					t.Fatalf("tensor %s: shape %v cannot be sized", tn.Name, tn.Shape)
				}
				n *= d
			}
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted config does not encode: %v", err)
		}
		mtp := ""
		if f1.MTP != nil {
			mtp = strconv.Itoa(f1.MTP.NumLayers)
		}
		f3, err := parseTextConfig(componentsWith(enc, mtp))
		if err != nil {
			t.Fatalf("encoded config is rejected: %v\n%s", err, enc)
		}
		back := *f3.config
		for _, x := range []*qwen35.Config{&c, &back} { // omitempty: [] is written as nothing
			if len(x.MRopeSection) == 0 {
				x.MRopeSection = nil
			}
			if len(x.EOSTokenIDs) == 0 {
				x.EOSTokenIDs = nil
			}
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("config changed through its encoding:\n%+v\n%+v", c, back)
		}
	})
}

// TestFuzzTextConfigSeedsValid: the seeds built from testConfig are
// accepted, so the fuzzer starts past the strict decode and Validate.
func TestFuzzTextConfigSeedsValid(t *testing.T) {
	good, err := json.Marshal(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	noMTP := bytes.Replace(good, []byte(`"mtp_num_hidden_layers":1`), []byte(`"mtp_num_hidden_layers":0`), 1)
	for _, c := range [][]byte{componentsWith(good, "1"), componentsWith(noMTP, "")} {
		if f, err := parseTextConfig(c); err != nil || f.Proposal == nil {
			t.Errorf("seed rejected: %v\n%s", err, c)
		}
	}
}
