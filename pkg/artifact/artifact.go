// Package artifact reads and writes the .ninfer weights container: a
// 32-byte entry header, a closed-schema UTF-8 JSON directory and a
// 4096-aligned payload of tensor and resource objects. Version 3 is read and
// written; version 2 is read for inspection. The byte layout and every
// validation rule are specified in docs/FORMAT.md.
package artifact

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Container constants.
const (
	// DirectoryFormat is the value of the directory's "format" member.
	DirectoryFormat = "ninfer"
	// Version is the container version this package writes.
	Version = 3
	// HeaderSize is the size of the v3 entry header.
	HeaderSize = 32
	// V2PrefixSize is the size of the v2 prefix.
	V2PrefixSize = 16
	// PayloadAlignment is the alignment of the payload start in the file.
	PayloadAlignment = 4096
	// MaxDirectoryBytes bounds json_bytes so a corrupt header cannot make a
	// reader allocate the whole file.
	MaxDirectoryBytes = 64 << 20
	// ResourceEncoding is the only resource encoding of container v3.
	ResourceEncoding = "raw_bytes_v1"
	// resourceEncodingV2 is the v2 spelling of ResourceEncoding.
	resourceEncodingV2 = "raw-bytes-v1"
)

// Object kinds.
const (
	KindTensor   = "tensor"
	KindResource = "resource"
)

// Component names. ComponentText, ComponentMTP and ComponentProposal hold
// tensors; ComponentFrontend holds resources.
const (
	ComponentText     = qwen35.ComponentText
	ComponentMTP      = qwen35.ComponentMTP
	ComponentProposal = qwen35.ComponentProposal
	ComponentFrontend = "frontend"
)

// Magic numbers of the container versions.
var (
	magicPrefix = []byte("NINFER\x00") // + version byte
	magicPartV3 = []byte("NINPRT\x00\x03")
)

// ErrInvalid is wrapped by every error that reports a malformed or
// unsupported artifact (as opposed to an I/O failure).
var ErrInvalid = errors.New("invalid ninfer artifact")

// FormatError is a validation error: the file, the object (if any) and what
// is wrong. It formats as one line, e.g.
// `model.ninfer: object "text/final_norm": bytes 10 != 128 for bf16 [64]`.
type FormatError struct {
	Path   string // file name as given to Open
	Object string // object id or name; empty for file-level errors
	Msg    string
}

func (e *FormatError) Error() string {
	if e.Object != "" {
		return fmt.Sprintf("%s: object %s: %s", termsafe.Path(e.Path), termsafe.Quote(e.Object), e.Msg)
	}
	return fmt.Sprintf("%s: %s", termsafe.Path(e.Path), e.Msg)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FormatError) Unwrap() error { return ErrInvalid }

// Object is one directory entry. Offsets are relative to the payload start.
type Object struct {
	ID        string
	Kind      string        // KindTensor or KindResource
	Component string        // text, mtp, proposal (tensors); frontend (resources); v2: the name's first segment
	Shape     []int64       // tensors only; empty for a scalar
	Format    format.Format // tensors only
	Layout    format.Layout // tensors only
	Encoding  string        // resources only: ResourceEncoding
	Offset    int64
	Bytes     int64
	SHA256    string // lowercase hex of the payload bytes; empty when absent
}

// IsTensor reports whether o is a tensor object.
func (o *Object) IsTensor() bool { return o.Kind == KindTensor }

// End returns the payload-relative end offset of the object.
func (o *Object) End() int64 { return o.Offset + o.Bytes }

// ShapeString formats a shape as "[a,b]" ("[]" for a scalar).
func ShapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// MTPInfo is the "mtp" component.
type MTPInfo struct {
	NumLayers int
}

// ProposalInfo is the "proposal" component (reduced-vocabulary draft head).
type ProposalInfo struct {
	Rows   int64
	Source string
}

// Identity is the v2 identity block.
type Identity struct {
	ModelID, WeightsID string
}

// CountByComponent returns per-component object counts.
func (f *File) CountByComponent() map[string]int {
	out := map[string]int{}
	for i := range f.Objects {
		out[f.Objects[i].Component]++
	}
	return out
}

// BytesByComponent returns per-component payload bytes.
func (f *File) BytesByComponent() map[string]int64 {
	out := map[string]int64{}
	for i := range f.Objects {
		out[f.Objects[i].Component] += f.Objects[i].Bytes
	}
	return out
}

// BytesByFormat returns payload bytes per tensor format (resources are
// counted under format.RawBytes).
func (f *File) BytesByFormat() map[format.Format]int64 {
	out := map[format.Format]int64{}
	for i := range f.Objects {
		o := &f.Objects[i]
		if o.IsTensor() {
			out[o.Format] += o.Bytes
		} else {
			out[format.RawBytes] += o.Bytes
		}
	}
	return out
}

// Formats returns the sorted unique tensor format names of the artifact.
func (f *File) Formats() []string {
	seen := map[string]bool{}
	var out []string
	for i := range f.Objects {
		o := &f.Objects[i]
		if o.IsTensor() && !seen[string(o.Format)] {
			seen[string(o.Format)] = true
			out = append(out, string(o.Format))
		}
	}
	sort.Strings(out)
	return out
}

// TotalObjectBytes returns the sum of all objects' sizes (excluding
// alignment gaps).
func (f *File) TotalObjectBytes() int64 {
	var n int64
	for i := range f.Objects {
		n += f.Objects[i].Bytes
	}
	return n
}

// Object returns the object with the given id.
func (f *File) Object(id string) (*Object, bool) {
	i, ok := f.byID[id]
	if !ok {
		return nil, false
	}
	return &f.Objects[i], true
}

// Tensors returns the tensor objects in file order.
func (f *File) Tensors() []*Object { return f.filter(KindTensor) }

// ResourceObjects returns the resource objects in file order.
func (f *File) ResourceObjects() []*Object { return f.filter(KindResource) }

func (f *File) filter(kind string) []*Object {
	var out []*Object
	for i := range f.Objects {
		if f.Objects[i].Kind == kind {
			out = append(out, &f.Objects[i])
		}
	}
	return out
}

// Config returns the text config (container v3 only).
func (f *File) Config() (qwen35.Config, error) {
	if f.config == nil {
		return qwen35.Config{}, fmt.Errorf("%s: artifact v%d has no model config", f.Path, f.Version)
	}
	return *f.config, nil
}
