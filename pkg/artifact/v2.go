package artifact

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

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
	if err := f.parseObjects(root.vals["objects"], f.parseObjectV2, "name"); err != nil {
		return err
	}
	for _, o := range f.Objects {
		if o.Kind == KindResource {
			f.Resources = append(f.Resources, o.ID)
		}
	}
	return f.checkRanges()
}

func (f *File) parseObjectV2(i int, raw json.RawMessage) (Object, error) {
	e, err := f.parseObjectHead(i, raw, syntaxV2)
	if err != nil {
		return Object{}, err
	}
	o := &e.o
	o.Component, _, _ = strings.Cut(o.ID, "/")
	if o.Kind == KindResource {
		err = e.readResource(syntaxV2)
	} else {
		if o.ID == qwen35.NameDraftHead || o.ID == qwen35.NameDraftIDs {
			o.Component = ComponentProposal
		}
		err = e.readTensor(syntaxV2)
	}
	if err != nil {
		return *o, e.bad("%v", err)
	}
	return *o, nil
}
