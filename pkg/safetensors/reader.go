package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/termsafe"
	"golang.org/x/sys/unix"
)

// MaxHeaderSize bounds the JSON header (the Hugging Face reader uses the same
// 100 MB limit).
const MaxHeaderSize = 100_000_000

// metadataKey is the reserved header key for free-form string metadata.
const metadataKey = "__metadata__"

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int64
	// Begin and End are byte offsets relative to the start of the data buffer.
	Begin, End int64
}

// Size returns End−Begin, the tensor's byte size.
func (t TensorInfo) Size() int64 { return t.End - t.Begin }

// File is an open, validated, memory-mapped safetensors file.
type File struct {
	path     string
	mm       []byte // whole mapping (nil for an empty buffer parsed from bytes)
	data     []byte // the data buffer, after the header
	tensors  []TensorInfo
	byName   map[string]int
	metadata map[string]string
}

// header is the parsed, validated header of a safetensors buffer.
type header struct {
	dataStart int64
	tensors   []TensorInfo // sorted by name
	metadata  map[string]string
}

// Open memory-maps path read-only and validates its header. Its errors
// show path through termsafe.Path: a shard or file name from an index or
// a command line may hold control bytes.
func Open(path string) (*File, error) {
	shown := termsafe.Path(path)
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // its message would repeat path raw
			err = pe.Err
		}
		return nil, fmt.Errorf("safetensors: %s: %w", shown, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", shown, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors: %s: not a regular file", shown)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("safetensors: %s: file is %d bytes, shorter than the 8-byte header length", shown, size)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("safetensors: %s: file of %d bytes cannot be mapped", shown, size)
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: mmap: %w", shown, err)
	}
	h, err := parse(mm)
	if err != nil {
		_ = unix.Munmap(mm)
		return nil, fmt.Errorf("safetensors: %s: %w", shown, err)
	}
	return newFile(path, mm, h), nil
}

// FromBytes validates an in-memory safetensors image; the File keeps a
// reference to buf (no copy). Close is a no-op for such a File.
func FromBytes(name string, buf []byte) (*File, error) {
	h, err := parse(buf)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", termsafe.Path(name), err)
	}
	f := newFile(name, nil, h)
	f.data = buf[h.dataStart:len(buf):len(buf)]
	return f, nil
}

func newFile(path string, mm []byte, h *header) *File {
	f := &File{path: path, mm: mm, tensors: h.tensors, metadata: h.metadata, byName: make(map[string]int, len(h.tensors))}
	if mm != nil {
		f.data = mm[h.dataStart:len(mm):len(mm)]
	}
	for i, t := range h.tensors {
		f.byName[t.Name] = i
	}
	return f
}

// Path returns the path the file was opened from.
func (f *File) Path() string { return f.path }

// Tensors returns the tensor descriptions sorted by name. The slice is shared:
// do not modify it.
func (f *File) Tensors() []TensorInfo { return f.tensors }

// Lookup returns the description of the named tensor.
func (f *File) Lookup(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// Data returns a read-only view of the named tensor's bytes (nil if absent).
// The view is valid until Close; writing to it faults.
func (f *File) Data(name string) []byte {
	i, ok := f.byName[name]
	if !ok {
		return nil
	}
	t := f.tensors[i]
	if f.data == nil { // closed
		return nil
	}
	return f.data[t.Begin:t.End:t.End]
}

// Metadata returns the header's __metadata__ map (nil if absent).
func (f *File) Metadata() map[string]string { return f.metadata }

// DataSize returns the size of the data buffer in bytes.
func (f *File) DataSize() int64 { return int64(len(f.data)) }

// Close unmaps the file. Views returned by Data become invalid.
func (f *File) Close() error {
	if f.mm == nil {
		return nil
	}
	err := unix.Munmap(f.mm)
	f.mm, f.data = nil, nil
	if err != nil {
		return fmt.Errorf("safetensors: %s: munmap: %w", termsafe.Path(f.path), err)
	}
	return nil
}

type rawInfo struct {
	DType       *string            `json:"dtype"`
	Shape       *[]int64           `json:"shape"`
	DataOffsets *[]json.RawMessage `json:"data_offsets"`
}

// parse validates a whole safetensors image held in buf.
func parse(buf []byte) (*header, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("%d bytes is shorter than the 8-byte header length", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	if n < 2 {
		return nil, fmt.Errorf("header length %d is too small for a JSON object", n)
	}
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("header length %d exceeds the %d bytes after the length field", n, len(buf)-8)
	}
	hdr := buf[8 : 8+n]
	if hdr[0] != '{' {
		return nil, fmt.Errorf("header does not start with '{'")
	}
	if !utf8.Valid(hdr) {
		return nil, fmt.Errorf("header is not valid UTF-8")
	}
	dataLen := int64(uint64(len(buf)) - 8 - n)

	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("header is not a JSON object")
	}
	h := &header{dataStart: int64(8 + n)}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header JSON: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("header JSON: object key is not a string")
		}
		if name == "" {
			return nil, fmt.Errorf("header has a tensor with an empty name")
		}
		if seen[name] {
			return nil, fmt.Errorf("duplicate header key %s", termsafe.Quote(name))
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("header JSON: value of %s: %w", termsafe.Quote(name), err)
		}
		if name == metadataKey {
			md, err := parseMetadata(raw)
			if err != nil {
				return nil, err
			}
			h.metadata = md
			continue
		}
		t, err := parseInfo(name, raw, dataLen)
		if err != nil {
			return nil, err
		}
		h.tensors = append(h.tensors, t)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("header JSON: unterminated object")
	}
	// Only whitespace (the writer's space padding) may follow the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("header JSON: trailing data after the object")
	}
	if err := checkOverlaps(h.tensors); err != nil {
		return nil, err
	}
	sort.Slice(h.tensors, func(i, j int) bool { return h.tensors[i].Name < h.tensors[j].Name })
	return h, nil
}

func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var md map[string]string
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, fmt.Errorf("%s: must be an object of strings: %w", metadataKey, err)
	}
	return md, nil
}

func parseInfo(name string, raw json.RawMessage, dataLen int64) (TensorInfo, error) {
	var ri rawInfo
	if err := json.Unmarshal(raw, &ri); err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %s: %w", termsafe.Quote(name), err)
	}
	if ri.DType == nil || ri.Shape == nil || ri.DataOffsets == nil {
		return TensorInfo{}, fmt.Errorf("tensor %s: needs dtype, shape and data_offsets", termsafe.Quote(name))
	}
	t := TensorInfo{Name: name, DType: DType(*ri.DType), Shape: *ri.Shape}
	if t.Shape == nil {
		t.Shape = []int64{}
	}
	if !t.DType.Known() {
		return TensorInfo{}, fmt.Errorf("tensor %s: unknown dtype %s", termsafe.Quote(name), termsafe.Quote(*ri.DType))
	}
	size, err := ByteSize(t.DType, t.Shape)
	if err != nil {
		return TensorInfo{}, fmt.Errorf("tensor %s: %w", termsafe.Quote(name), err)
	}
	offs := *ri.DataOffsets
	if len(offs) != 2 {
		return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets has %d entries, want 2", termsafe.Quote(name), len(offs))
	}
	var be [2]int64
	for i, o := range offs {
		var v uint64
		if err := json.Unmarshal(o, &v); err != nil {
			return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets[%d] %s is not a non-negative integer", termsafe.Quote(name), i, termsafe.QuoteBytes(o))
		}
		if v > uint64(dataLen) {
			return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets[%d]=%d lies beyond the %d-byte data buffer", termsafe.Quote(name), i, v, dataLen)
		}
		be[i] = int64(v)
	}
	t.Begin, t.End = be[0], be[1]
	if t.End < t.Begin {
		return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets [%d,%d] end before begin", termsafe.Quote(name), t.Begin, t.End)
	}
	if t.End-t.Begin != size {
		return TensorInfo{}, fmt.Errorf("tensor %s: %s %v needs %d bytes, data_offsets [%d,%d] span %d", termsafe.Quote(name), t.DType, t.Shape, size, t.Begin, t.End, t.End-t.Begin)
	}
	return t, nil
}

// checkOverlaps rejects tensors whose byte ranges intersect. Gaps are allowed.
func checkOverlaps(ts []TensorInfo) error {
	idx := make([]int, len(ts))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		x, y := ts[idx[a]], ts[idx[b]]
		if x.Begin != y.Begin {
			return x.Begin < y.Begin
		}
		return x.End < y.End
	})
	var prev *TensorInfo
	for _, i := range idx {
		t := &ts[i]
		if t.Size() == 0 {
			continue
		}
		if prev != nil && t.Begin < prev.End {
			return fmt.Errorf("tensors %s [%d,%d] and %s [%d,%d] overlap", termsafe.Quote(prev.Name), prev.Begin, prev.End, termsafe.Quote(t.Name), t.Begin, t.End)
		}
		prev = t
	}
	return nil
}
