package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
)

// seeded returns a fresh PRNG and logs its seed so a failure can be
// replayed (NINFER_TEST_SEED).
var seeded = numtest.Seeded

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestWriteOpenRoundTrip(t *testing.T) {
	r := seeded(t)
	tensors := []NamedTensor{
		{Name: "b.weight", DType: BF16, Shape: []int64{3, 5}, Data: randBytes(r, 30)},
		{Name: "a.weight", DType: F32, Shape: []int64{7}, Data: randBytes(r, 28)},
		{Name: "c.scalar", DType: F64, Shape: []int64{}, Data: randBytes(r, 8)},
		{Name: "d.empty", DType: I64, Shape: []int64{0, 4}, Data: nil},
		{Name: "e.mask", DType: BOOL, Shape: []int64{1, 1, 3}, Data: randBytes(r, 3)},
		{Name: "f.fp4", DType: F4, Shape: []int64{6}, Data: randBytes(r, 3)},
	}
	md := map[string]string{"format": "pt", "note": "quote\" and ünïcode"}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Write(path, tensors, md); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	if (8+n)%8 != 0 {
		t.Errorf("data buffer starts at %d, not 8-aligned", 8+n)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !reflect.DeepEqual(f.Metadata(), md) {
		t.Errorf("metadata %v, want %v", f.Metadata(), md)
	}
	names := []string{}
	for _, ti := range f.Tensors() {
		names = append(names, ti.Name)
	}
	if want := []string{"a.weight", "b.weight", "c.scalar", "d.empty", "e.mask", "f.fp4"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names %v, want %v (sorted)", names, want)
	}
	for _, want := range tensors {
		ti, ok := f.Lookup(want.Name)
		if !ok {
			t.Fatalf("%s missing", want.Name)
		}
		if ti.DType != want.DType || !reflect.DeepEqual(ti.Shape, want.Shape) {
			t.Errorf("%s: got %s %v, want %s %v", want.Name, ti.DType, ti.Shape, want.DType, want.Shape)
		}
		if got := f.Data(want.Name); !bytes.Equal(got, want.Data) {
			t.Errorf("%s: data differs", want.Name)
		}
	}
	if f.Data("nope") != nil {
		t.Error("Data of a missing tensor is not nil")
	}
	// Encode gives the same bytes as Write.
	img, err := Encode(tensors, md)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img, raw) {
		t.Error("Encode and Write differ")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// No temp files left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want 1", len(ents))
	}
}

func TestWriteRejects(t *testing.T) {
	cases := []struct {
		name string
		ts   []NamedTensor
		want string
	}{
		{"size", []NamedTensor{{Name: "x", DType: F32, Shape: []int64{2}, Data: make([]byte, 4)}}, "needs 8 bytes"},
		{"dup", []NamedTensor{{Name: "x", DType: U8, Shape: []int64{1}, Data: []byte{1}}, {Name: "x", DType: U8, Shape: []int64{1}, Data: []byte{1}}}, "duplicate"},
		{"dtype", []NamedTensor{{Name: "x", DType: "Q4", Shape: []int64{1}, Data: []byte{1}}}, "unknown dtype"},
		{"meta", []NamedTensor{{Name: "__metadata__", DType: U8, Shape: []int64{1}, Data: []byte{1}}}, "invalid tensor name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.safetensors")
			err := Write(path, c.ts, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if _, serr := os.Stat(path); !os.IsNotExist(serr) {
				t.Error("failed write left the destination file")
			}
		})
	}
}

// image builds a safetensors image from a raw header string and data size.
func image(hdr string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, make([]byte, data)...)
}

func TestParseErrors(t *testing.T) {
	big := binary.LittleEndian.AppendUint64(nil, MaxHeaderSize+1)
	huge := binary.LittleEndian.AppendUint64(nil, math.MaxUint64)
	cases := []struct {
		name string
		buf  []byte
		want string
	}{
		{"short", []byte{1, 2, 3}, "shorter than the 8-byte"},
		{"hdr_over_limit", append(big, make([]byte, 64)...), "exceeds the 100000000-byte limit"},
		{"hdr_overflow", append(huge, make([]byte, 64)...), "exceeds"},
		{"hdr_past_end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "exceeds the 2 bytes"},
		{"not_object", image(`[1,2]`, 0), "does not start with '{'"},
		{"bad_json", image(`{"a":`, 0), "header JSON"},
		{"trailing", image(`{} {}`, 0), "trailing data"},
		{"bad_utf8", image("{\"\xff\":1}", 0), "UTF-8"},
		{"dup", image(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), `duplicate header key "a"`},
		{"dtype", image(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, 1), `tensor "a": unknown dtype "Q4"`},
		{"missing_field", image(`{"a":{"dtype":"U8","shape":[1]}}`, 1), `tensor "a": needs dtype`},
		{"size_mismatch", image(`{"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}}`, 12), `tensor "w": BF16 [2 3] needs 12 bytes`},
		{"past_buffer", image(`{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 3), `beyond the 3-byte data buffer`},
		{"reversed", image(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}}`, 4), "end before begin"},
		{"neg_offset", image(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, 4), "not a non-negative integer"},
		{"three_offsets", image(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 4), "3 entries"},
		{"neg_dim", image(`{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 4), "negative dimension"},
		{"shape_overflow", image(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 4), "overflows"},
		{"fraction_dim", image(`{"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}}`, 4), `tensor "w"`},
		{"overlap", image(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`, 8), "overlap"},
		{"sub_byte", image(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}`, 8), "whole number of bytes"},
		{"metadata_type", image(`{"__metadata__":{"a":1}}`, 0), "__metadata__"},
		{"info_not_object", image(`{"a":7}`, 0), `tensor "a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.buf)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	// Gaps, zero-size tensors sharing an offset, padding, null metadata.
	h, err := parse(image(`{"__metadata__":null,"z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"y":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"a":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}}    `, 8))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.tensors) != 3 || h.tensors[0].Name != "a" || h.tensors[2].Name != "z" {
		t.Fatalf("tensors %+v", h.tensors)
	}
}

func TestOpenErrorsNameFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(p, image(`{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("err %v should name the file and tensor", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.safetensors")); err == nil {
		t.Fatal("opening a missing file succeeded")
	}
	empty := filepath.Join(dir, "empty.safetensors")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "shorter") {
		t.Fatalf("empty file: %v", err)
	}
}

func TestByteSize(t *testing.T) {
	cases := []struct {
		d     DType
		shape []int64
		want  int64
		ok    bool
	}{
		{BF16, []int64{3, 4}, 24, true},
		{F32, []int64{}, 4, true},
		{F8E4M3, []int64{5}, 5, true},
		{F6E2M3, []int64{4}, 3, true},
		{F6E2M3, []int64{3}, 0, false},
		{I64, []int64{0, 1 << 40}, 0, true},
		{F64, []int64{1 << 31, 1 << 31}, 0, false},
		{"X", []int64{1}, 0, false},
	}
	for _, c := range cases {
		got, err := ByteSize(c.d, c.shape)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ByteSize(%s, %v) = %d, %v; want %d ok=%v", c.d, c.shape, got, err, c.want, c.ok)
		}
	}
}
