package safetensors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/inerttest"
)

// TestErrorsQuoteUntrustedNames feeds tensor names and dtypes holding
// terminal escapes, or 100,000 bytes long, through FromBytes and Encode.
func TestErrorsQuoteUntrustedNames(t *testing.T) {
	const ctrl = "\x1b[31mred\x07"
	long := strings.Repeat("n", 100_000)
	const ctrlQ, longQ = `"\x1b[31mred\a"`, "(100000 bytes)"
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	info := func(dtype string, b, e int) string {
		return `{"dtype":` + js(dtype) + `,"shape":[1],"data_offsets":[` + string(rune('0'+b)) + `,` + string(rune('0'+e)) + `]}`
	}
	parseCases := []struct {
		name, hdr, want string
	}{
		{"ctrl_name_unknown_dtype", `{` + js(ctrl) + `:` + info("Q4", 0, 1) + `}`, ctrlQ},
		{"long_name_unknown_dtype", `{` + js(long) + `:` + info("Q4", 0, 1) + `}`, longQ},
		{"ctrl_dtype", `{"a":` + info(ctrl, 0, 1) + `}`, ctrlQ},
		{"long_dtype", `{"a":` + info(long, 0, 1) + `}`, longQ},
		{"ctrl_name_missing_fields", `{` + js(ctrl) + `:{"dtype":"U8"}}`, ctrlQ},
		{"long_name_missing_fields", `{` + js(long) + `:{"dtype":"U8"}}`, longQ},
		{"ctrl_duplicate", `{` + js(ctrl) + `:` + info("U8", 0, 1) + `,` + js(ctrl) + `:` + info("U8", 1, 2) + `}`, ctrlQ},
		{"long_duplicate", `{` + js(long) + `:` + info("U8", 0, 1) + `,` + js(long) + `:` + info("U8", 1, 2) + `}`, longQ},
		{"ctrl_overlap", `{` + js(ctrl) + `:` + info("U8", 0, 1) + `,` + js(ctrl+"2") + `:{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, `"\x1b[31mred\a"`},
		{"long_overlap", `{` + js(long) + `:` + info("U8", 0, 1) + `,` + js(long+"2") + `:{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, longQ},
		{"ctrl_past_buffer", `{` + js(ctrl) + `:` + info("U8", 0, 9) + `}`, ctrlQ},
		{"long_bad_value", `{` + js(long) + `:7}`, longQ},
		// A raw JSON value holds no control byte but JSON whitespace (CR,
		// LF, tab) inside an object or array.
		{"ctrl_data_offset", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[{"x":` + "\r\n" + js(ctrl) + `},1]}}`, `\r\n`},
		{"long_data_offset", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[` + js(long) + `,1]}}`, "(100002 bytes)"},
	}
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromBytes("t.safetensors", image(c.hdr, 4))
			inerttest.CheckError(t, err, c.want)
		})
	}
	encodeCases := []struct {
		name   string
		tensor NamedTensor
		want   string
	}{
		{"encode_ctrl_invalid_utf8_name", NamedTensor{Name: ctrl + "\xff", DType: U8, Shape: []int64{1}, Data: []byte{0}}, `"\x1b[31mred\a\xff"`},
		{"encode_long_name_size", NamedTensor{Name: long, DType: U8, Shape: []int64{2}, Data: []byte{0}}, longQ},
		{"encode_ctrl_dtype", NamedTensor{Name: "a", DType: DType(ctrl), Shape: []int64{1}, Data: []byte{0}}, ctrlQ},
		{"encode_long_dtype", NamedTensor{Name: "a", DType: DType(long), Shape: []int64{1}, Data: []byte{0}}, longQ},
	}
	for _, c := range encodeCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Encode([]NamedTensor{c.tensor}, nil)
			inerttest.CheckError(t, err, c.want)
		})
	}
}

// TestOpenErrorsShowPathInert: Open's errors show the file's path through
// termsafe.Path (a shard name from an index may hold terminal escapes),
// for a file that is not safetensors, a missing one and a directory.
func TestOpenErrorsShowPathInert(t *testing.T) {
	dir := t.TempDir()
	const ctrl = "\x1b[31mred\x07"
	const ctrlQ = `\x1b[31mred\a`
	junk := filepath.Join(dir, ctrl+".safetensors")
	if err := os.WriteFile(junk, []byte("this is not a safetensors file"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, ctrl+"-short.safetensors")
	if err := os.WriteFile(short, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, ctrl+"-dir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, want string }{
		{"not_safetensors", junk, ctrlQ + `.safetensors": header length`},
		{"too_short", short, ctrlQ + `-short.safetensors": file is 2 bytes`},
		{"missing", filepath.Join(dir, ctrl+"-missing"), ctrlQ + `-missing": no such file`},
		{"directory", sub, ctrlQ + `-dir": not a regular file`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Open(c.path)
			if err == nil {
				f.Close()
			}
			inerttest.CheckError(t, err, c.want)
		})
	}
	_, err := FromBytes(ctrl, []byte("junk"))
	inerttest.CheckError(t, err, `"`+ctrlQ+`": `)
}
