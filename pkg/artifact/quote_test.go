package artifact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/inerttest"
)

// TestParseErrorsQuoteUntrustedValues feeds directory values and member
// names holding terminal escapes, or 100,000 bytes long, through Parse.
// Object ids are capped at 1024 bytes, so their long case is 1,001 bytes.
func TestParseErrorsQuoteUntrustedValues(t *testing.T) {
	const ctrl = "\x1b[31mred\x07"
	long := strings.Repeat("n", 100_000)
	zeros := strings.Repeat("0", 100_000)
	const ctrlQ, longQ = `"\x1b[31mred\a"`, "(100000 bytes)"
	js, payload := splitFile(t, validFile(t))
	objectOf := func(m map[string]any, kind string) map[string]any {
		for i := range objectsOf(m) {
			if o := objectAt(m, i); o["kind"] == kind {
				return o
			}
		}
		t.Fatalf("no %s object", kind)
		return nil
	}
	set := func(kind, member string, v any) func(map[string]any) {
		return func(m map[string]any) { objectOf(m, kind)[member] = v }
	}
	root := func(member string, v any) func(map[string]any) {
		return func(m map[string]any) { m[member] = v }
	}
	resource := func(id string) func(map[string]any) {
		return func(m map[string]any) {
			text := m["components"].(map[string]any)["text"].(map[string]any)
			text["resources"] = append(text["resources"].([]any), id)
		}
	}
	cases := []struct {
		name string
		mut  func(map[string]any)
		want string
	}{
		{"ctrl_format", root("format", ctrl), ctrlQ},
		{"long_format", root("format", long), longQ},
		{"ctrl_architecture", root("architecture", ctrl), ctrlQ},
		{"long_architecture", root("architecture", long), longQ},
		{"ctrl_unexpected_member", root(ctrl, 1), ctrlQ},
		{"long_unexpected_member", root(long, 1), longQ},
		{"ctrl_object_id", set(KindTensor, "id", "text/"+ctrl), `"text/\x1b[31mred\a"`},
		{"long_object_id", set(KindTensor, "id", "text/"+long[:995]+" "), "(1001 bytes)"},
		{"long_object_id_empty_segment", set(KindTensor, "id", "text//"+long[:994]), "(1000 bytes)"},
		{"ctrl_kind", set(KindTensor, "kind", ctrl), ctrlQ},
		{"long_kind", set(KindTensor, "kind", long), longQ},
		{"ctrl_sha256", set(KindTensor, "sha256", ctrl), ctrlQ},
		{"long_sha256", set(KindTensor, "sha256", long), longQ},
		{"ctrl_tensor_component", set(KindTensor, "component", ctrl), ctrlQ},
		{"long_tensor_component", set(KindTensor, "component", long), longQ},
		{"ctrl_resource_component", set(KindResource, "component", ctrl), ctrlQ},
		{"long_resource_component", set(KindResource, "component", long), longQ},
		{"ctrl_resource_encoding", set(KindResource, "encoding", ctrl), ctrlQ},
		{"long_resource_encoding", set(KindResource, "encoding", long), longQ},
		{"ctrl_listed_resource", resource(ctrl), ctrlQ},
		{"long_listed_resource", resource(long), longQ},
		// JSON numbers hold no control byte; only their length matters.
		{"long_offset_out_of_range", set(KindTensor, "offset", json.Number("9"+zeros[:99_999])), longQ},
		{"long_offset_fraction", set(KindTensor, "offset", json.Number("1."+zeros[:99_998])), longQ},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := decodeDir(t, js)
			c.mut(m)
			_, err := parseBytes(assembleV3(reseal(encodeDir(t, m)), payload))
			inerttest.CheckError(t, err, c.want)
		})
	}
	// A duplicate member cannot be built through a map: edit the JSON.
	for _, c := range []struct{ name, key, want string }{{"ctrl_duplicate_member", ctrl, ctrlQ}, {"long_duplicate_member", long, longQ}} {
		t.Run(c.name, func(t *testing.T) {
			k, _ := json.Marshal(c.key)
			ed := bytes.Replace(js, []byte(`"objects":[{`), []byte(`"objects":[{`+string(k)+`:1,`+string(k)+`:1,`), 1)
			if bytes.Equal(ed, js) {
				t.Fatal("no objects array to edit")
			}
			_, err := parseBytes(assembleV3(reseal(ed), payload))
			inerttest.CheckError(t, err, c.want)
		})
	}
}

// TestObjectIDsInErrorsAreBounded: an object id in an error line is quoted
// and cut to an excerpt (termsafe.Quote), whatever its length: a v2 name
// may be any string (no 1024-byte cap), and FormatError, the reader, the
// plan and the writer all show ids the same way.
func TestObjectIDsInErrorsAreBounded(t *testing.T) {
	long := "text/" + strings.Repeat("n", 100_000)
	const longQ = `…` + " (100005 bytes)"
	const ctrl = "text/\x1b[31mred\x07"
	const ctrlQ = `"text/\x1b[31mred\a"`
	v2 := func(name string) error {
		js := strings.Replace(v2Directory, `"name":"text/final_norm","kind":"tensor","shape":[64],"format":"BF16","layout":"contiguous-le-v1","offset":1536`,
			`"name":`+strconvQuote(name)+`,"kind":"tensor","shape":[64],"format":"BF16","layout":"contiguous-le-v1","offset":1537`, 1)
		if js == v2Directory {
			t.Fatal("no v2 object to edit")
		}
		_, err := parseBytes(v2File(t, js))
		return err
	}
	plan := func(id string) error {
		return NewPlan(Meta{}).AddResource(id, ComponentFrontend, 0)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"format_error_long", &FormatError{Path: "m.ninfer", Object: long, Msg: "bad"}, `m.ninfer: object "text/` + strings.Repeat("n", 59) + `"` + longQ + ": bad"},
		{"format_error_ctrl", &FormatError{Path: "m\x1b[2J.ninfer", Object: ctrl, Msg: "bad"}, `"m\x1b[2J.ninfer": object ` + ctrlQ + ": bad"},
		{"v2_long_name", v2(long), longQ},
		{"v2_ctrl_name", v2(ctrl), ctrlQ},
		{"plan_1000_byte_id", plan("frontend/" + strings.Repeat("n", 991)), "(1000 bytes): resource size must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inerttest.CheckError(t, c.err, c.want)
			if n := len(c.err.Error()); n > 512 {
				t.Errorf("error is %d bytes", n)
			}
		})
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
