package artifact

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// parseV2 reads a legacy v2 container (16-byte prefix, {identity, objects}
// directory, uppercase format names, hyphenated layouts) into the v3 model.
// Such files have no config; they are opened for inspection only.
func (f *File) parseV2(hdr []byte) error {
	if err := f.directoryBounds(V2PrefixSize, binary.LittleEndian.Uint64(hdr[8:16])); err != nil {
		return err
	}
	if f.PayloadStart > f.Size {
		return f.errf("", "truncated: payload starts at %d, file is %d bytes", f.PayloadStart, f.Size)
	}
	f.PayloadBytes = f.Size - f.PayloadStart
	js, err := f.readAt(V2PrefixSize, f.JSONBytes)
	if err != nil {
		return err
	}
	root, err := splitDocument(js)
	if err != nil {
		return f.errf("", "%v", err)
	}
	if err := root.exact(v2Root, nil); err != nil {
		return f.errf("", "directory: %v", err)
	}
	id, err := parseObject(root.vals["identity"])
	if err == nil {
		err = id.exact(v2Identity, nil)
	}
	ident := &Identity{}
	if err == nil {
		ident.ModelID, err = id.str("model_id")
	}
	if err == nil {
		ident.WeightsID, err = id.str("weights_id")
	}
	if err == nil && (ident.ModelID == "" || ident.WeightsID == "") {
		err = fmt.Errorf("model_id and weights_id must be non-empty")
	}
	if err != nil {
		return f.errf("", "directory: identity: %v", err)
	}
	f.Identity = ident
	f.Name = ident.ModelID
	elems, err := asArray("objects", root.vals["objects"])
	if err != nil {
		return f.errf("", "directory: %v", err)
	}
	if len(elems) == 0 {
		return f.errf("", "directory: objects is empty")
	}
	f.Objects = make([]Object, 0, len(elems))
	f.byID = make(map[string]int, len(elems))
	for i, e := range elems {
		o, err := f.parseObjectV2(i, e)
		if err != nil {
			return err
		}
		if _, dup := f.byID[o.ID]; dup {
			return f.errf(o.ID, "duplicate object name")
		}
		f.byID[o.ID] = len(f.Objects)
		f.Objects = append(f.Objects, o)
		if o.Kind == KindResource {
			f.Resources = append(f.Resources, o.ID)
		}
	}
	return f.checkRanges()
}

func (f *File) parseObjectV2(i int, raw json.RawMessage) (Object, error) {
	where := fmt.Sprintf("objects[%d]", i)
	m, err := parseObject(raw)
	if err != nil {
		return Object{}, f.errf("", "directory: %s: %v", where, err)
	}
	var o Object
	if m.has("name") {
		if o.ID, err = m.str("name"); err != nil {
			return o, f.errf("", "directory: %s: %v", where, err)
		}
		if o.ID == "" {
			return o, f.errf("", "directory: %s: name is empty", where)
		}
	}
	bad := func(format string, a ...any) error {
		if o.ID == "" {
			return f.errf("", "directory: %s: %s", where, fmt.Sprintf(format, a...))
		}
		return f.errf(o.ID, format, a...)
	}
	if !m.has("kind") {
		return o, bad("missing member %q", "kind")
	}
	if o.Kind, err = m.str("kind"); err != nil {
		return o, bad("%v", err)
	}
	switch o.Kind {
	case KindTensor:
		err = m.exact(v2TensorMembers, nil)
	case KindResource:
		err = m.exact(v2ResourceMember, nil)
	default:
		return o, bad("unknown kind %q (want %q or %q)", o.Kind, KindTensor, KindResource)
	}
	if err != nil {
		return o, bad("%v", err)
	}
	if o.Offset, err = m.uint("offset"); err != nil {
		return o, bad("%v", err)
	}
	if o.Bytes, err = m.uint("bytes"); err != nil {
		return o, bad("%v", err)
	}
	o.Component, _, _ = strings.Cut(o.ID, "/")
	if o.Kind == KindResource {
		enc, err := m.str("encoding")
		if err != nil {
			return o, bad("%v", err)
		}
		if enc != resourceEncodingV2 {
			return o, bad("unknown resource encoding %q (want %q)", enc, resourceEncodingV2)
		}
		o.Encoding = ResourceEncoding
		if o.Bytes == 0 {
			return o, bad("resource bytes must be positive")
		}
		return o, nil
	}
	if o.ID == qwen35.NameDraftHead || o.ID == qwen35.NameDraftIDs {
		o.Component = ComponentProposal
	}
	if o.Shape, err = asShape(m.vals["shape"]); err != nil {
		return o, bad("%v", err)
	}
	fs, err := m.str("format")
	if err != nil {
		return o, bad("%v", err)
	}
	if o.Format, err = format.ParseV2(fs); err != nil {
		return o, bad("%v", err)
	}
	ls, err := m.str("layout")
	if err != nil {
		return o, bad("%v", err)
	}
	if o.Layout, err = format.ParseLayoutV2(ls); err != nil {
		return o, bad("%v", err)
	}
	if err := checkTensorGeometry(&o); err != nil {
		return o, bad("%v", err)
	}
	return o, nil
}
