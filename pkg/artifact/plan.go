package artifact

import (
	"encoding/hex"
	"fmt"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Meta is the directory content that is not an object.
type Meta struct {
	Name           string         // model name (directory "name")
	Config         qwen35.Config  // components.text.config
	ProposalSource string         // components.proposal.source, when a draft head is planned
	Metadata       map[string]any // free object: recipe, converter version, source info
	Provenance     map[string]any // optional free object
}

// Plan is the ordered object list of an artifact to be written: every
// object's id, kind, shape, format and size is fixed before the payload is
// written, so the directory (which precedes the payload) can be emitted
// first. Objects are written in the order they are added.
type Plan struct {
	meta    Meta
	objects []Object
	ids     map[string]bool
	cursor  int64
	unbound bool // skip the model binding: container-only test fixtures
}

// NewPlan starts an empty plan.
func NewPlan(meta Meta) *Plan {
	return &Plan{meta: meta, ids: map[string]bool{}}
}

func (p *Plan) checkNew(id, component string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if p.ids[id] {
		return fmt.Errorf("object %s: duplicate object id", termsafe.Quote(id))
	}
	prefix, ok := idPrefix[component]
	if !ok {
		return fmt.Errorf("object %s: unknown component %s", termsafe.Quote(id), termsafe.Quote(component))
	}
	if len(id) <= len(prefix) || id[:len(prefix)+1] != prefix+"/" {
		return fmt.Errorf("object %s: component %s objects must be named %s/...", termsafe.Quote(id), termsafe.Quote(component), prefix)
	}
	return nil
}

// AddTensor appends a tensor object; its size is format.EncodedSize(f, shape)
// and its offset the next 256-byte boundary.
func (p *Plan) AddTensor(id, component string, f format.Format, shape []int64) error {
	if err := p.checkNew(id, component); err != nil {
		return err
	}
	if component == ComponentFrontend {
		return fmt.Errorf("object %s: tensors cannot belong to component %s", termsafe.Quote(id), termsafe.Quote(component))
	}
	if _, err := format.Parse(string(f)); err != nil {
		return fmt.Errorf("object %s: %w", termsafe.Quote(id), err)
	}
	size, err := format.EncodedSize(f, shape)
	if err != nil {
		return fmt.Errorf("object %s: shape %s for %s: %w", termsafe.Quote(id), ShapeString(shape), f, err)
	}
	off := format.AlignUp(p.cursor, format.TensorAlignment)
	p.objects = append(p.objects, Object{
		ID: id, Kind: KindTensor, Component: component, Shape: append([]int64{}, shape...),
		Format: f, Layout: f.LayoutOf(), Offset: off, Bytes: size,
	})
	p.ids[id] = true
	p.cursor = off + size
	return nil
}

// AddResource appends a raw-bytes resource (component "frontend") of size
// bytes, byte-aligned.
func (p *Plan) AddResource(id, component string, size int64) error {
	if err := p.checkNew(id, component); err != nil {
		return err
	}
	if component != ComponentFrontend {
		return fmt.Errorf("object %s: resources must belong to component %q, got %s", termsafe.Quote(id), ComponentFrontend, termsafe.Quote(component))
	}
	if size <= 0 {
		return fmt.Errorf("object %s: resource size must be positive, got %d", termsafe.Quote(id), size)
	}
	p.objects = append(p.objects, Object{
		ID: id, Kind: KindResource, Component: component, Encoding: ResourceEncoding,
		Offset: p.cursor, Bytes: size,
	})
	p.ids[id] = true
	p.cursor += size
	return nil
}

// Objects returns a copy of the planned objects with their offsets.
func (p *Plan) Objects() []Object { return append([]Object(nil), p.objects...) }

// PayloadBytes returns the payload length: the end of the last object.
func (p *Plan) PayloadBytes() int64 { return p.cursor }

// spec builds the directory content; components are derived from the
// objects (resources list, mtp layer count from the config, proposal rows
// from text/draft_head).
func (p *Plan) spec(objects []Object, id [16]byte) *dirSpec {
	// The writer owns directory_sha256: a placeholder of the final length
	// here, sealed once the directory is final.
	metadata := make(map[string]any, len(p.meta.Metadata)+1)
	for k, v := range p.meta.Metadata {
		metadata[k] = v
	}
	metadata[MetaDirectorySHA256] = zeroHash
	// So is artifact_id: the header's id, recorded where the directory
	// digest covers it (the header itself is hashed by nothing).
	metadata[MetaArtifactID] = hex.EncodeToString(id[:])
	d := &dirSpec{
		name: p.meta.Name, config: p.meta.Config, objects: objects, payloadBytes: p.cursor,
		metadata: metadata, provenance: p.meta.Provenance, resources: []string{},
	}
	for i := range objects {
		o := &objects[i]
		switch {
		case o.Kind == KindResource:
			d.resources = append(d.resources, o.ID)
		case o.Component == ComponentMTP && d.mtp == nil:
			d.mtp = &MTPInfo{NumLayers: p.meta.Config.MTPNumHiddenLayers}
		case o.Component == ComponentProposal && d.proposal == nil:
			d.proposal = &ProposalInfo{Source: p.meta.ProposalSource}
		}
		if o.ID == qwen35.NameDraftHead && len(o.Shape) > 0 {
			if d.proposal == nil {
				d.proposal = &ProposalInfo{Source: p.meta.ProposalSource}
			}
			d.proposal.Rows = o.Shape[0]
		}
	}
	return d
}

// directory encodes and validates the directory; with placeholders, every
// object gets an all-zero sha256 of the final length. The directory digest
// is left as its all-zero placeholder (sealDirectory fills it in).
func (p *Plan) directory(path string, placeholders bool, id [16]byte) ([]byte, *File, error) {
	if len(p.objects) == 0 {
		return nil, nil, fmt.Errorf("%s: plan has no objects", path)
	}
	objs := p.Objects()
	if placeholders {
		for i := range objs {
			objs[i].SHA256 = zeroHash
		}
	}
	js, err := encodeDirectory(p.spec(objs, id))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	// Validate exactly as a reader will, so a writer never emits a file
	// that Open rejects.
	f := &File{Path: path, Version: Version, Size: -1, ID: id}
	if len(js) > MaxDirectoryBytes {
		return nil, nil, fmt.Errorf("%s: directory is %d bytes, above the %d-byte limit", path, len(js), MaxDirectoryBytes)
	}
	f.JSONBytes = int64(len(js))
	f.PayloadStart = format.AlignUp(HeaderSize+f.JSONBytes, PayloadAlignment)
	if err := f.parseDirectoryV3(js); err != nil {
		return nil, nil, err
	}
	if err := f.checkArtifactID(); err != nil {
		return nil, nil, err
	}
	if err := f.checkRanges(); err != nil {
		return nil, nil, err
	}
	if !p.unbound {
		if err := f.checkModel(); err != nil {
			return nil, nil, err
		}
	}
	if slot, err := digestSlot(js); err != nil || slot < 0 {
		return nil, nil, fmt.Errorf("%s: internal error: no directory digest slot (%v)", path, err)
	}
	f.Size = f.PayloadStart + f.PayloadBytes
	return js, f, nil
}

const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"
