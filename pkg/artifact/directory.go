package artifact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Member sets of the closed v3 schema.
var (
	rootRequired     = []string{"format", "version", "architecture", "name", "components", "objects", "files", "metadata"}
	rootOptional     = []string{"provenance"}
	tensorMembers    = []string{"id", "kind", "component", "shape", "format", "layout", "offset", "bytes"}
	resourceMembers  = []string{"id", "kind", "component", "encoding", "offset", "bytes"}
	optionalSHA      = []string{"sha256"}
	v2Root           = []string{"identity", "objects"}
	v2Identity       = []string{"model_id", "weights_id"}
	v2TensorMembers  = []string{"name", "kind", "shape", "format", "layout", "offset", "bytes"}
	v2ResourceMember = []string{"name", "kind", "encoding", "offset", "bytes"}
)

// splitDocument checks that js is UTF-8 holding exactly one JSON object and
// returns its members.
func splitDocument(js []byte) (*jsonObject, error) {
	if !utf8.Valid(js) {
		return nil, fmt.Errorf("directory is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("directory JSON: %v", err)
	}
	if rest := bytes.TrimSpace(js[dec.InputOffset():]); len(rest) > 0 {
		return nil, fmt.Errorf("directory JSON: trailing data after the root object")
	}
	root, err := parseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("directory root: %v", err)
	}
	return root, nil
}

// parseDirectoryV3 fills f from a v3 directory and validates everything that
// does not depend on the file length.
func (f *File) parseDirectoryV3(js []byte) error {
	root, err := splitDocument(js)
	if err != nil {
		return f.errf("", "%v", err)
	}
	if err := root.exact(rootRequired, rootOptional); err != nil {
		return f.errf("", "directory: %v", err)
	}
	if s, err := root.str("format"); err != nil {
		return f.errf("", "directory: %v", err)
	} else if s != DirectoryFormat {
		return f.errf("", "directory: format is %s, want %q", termsafe.Quote(s), DirectoryFormat)
	}
	if v, err := root.uint("version"); err != nil {
		return f.errf("", "directory: %v", err)
	} else if v != Version {
		return f.errf("", "directory: version %d does not match the header (3)", v)
	}
	if f.Architecture, err = root.str("architecture"); err != nil {
		return f.errf("", "directory: %v", err)
	}
	if f.Architecture != qwen35.Architecture {
		return f.errf("", "unsupported architecture %s (want %s)", termsafe.Quote(f.Architecture), qwen35.Architecture)
	}
	if f.Name, err = root.str("name"); err != nil {
		return f.errf("", "directory: %v", err)
	}
	if f.Metadata, err = decodeFreeObject("metadata", root.vals["metadata"]); err != nil {
		return f.errf("", "directory: %v", err)
	}
	if root.has("provenance") {
		if f.Provenance, err = decodeFreeObject("provenance", root.vals["provenance"]); err != nil {
			return f.errf("", "directory: %v", err)
		}
	}
	if err := f.parseFiles(root.vals["files"]); err != nil {
		return err
	}
	if err := f.parseComponents(root.vals["components"]); err != nil {
		return err
	}
	if err := f.parseObjects(root.vals["objects"], f.parseObjectV3, "id"); err != nil {
		return err
	}
	return f.checkComponents()
}

func (f *File) parseFiles(raw json.RawMessage) error {
	elems, err := asArray("files", raw)
	if err != nil {
		return f.errf("", "directory: %v", err)
	}
	if len(elems) != 1 {
		return f.errf("", "directory: files names %d files; only single-file artifacts are supported", len(elems))
	}
	o, err := parseObject(elems[0])
	if err == nil {
		err = o.exact([]string{"payload_bytes"}, nil)
	}
	if err == nil {
		f.PayloadBytes, err = o.uint("payload_bytes")
	}
	if err != nil {
		return f.errf("", "directory: files[0]: %v", err)
	}
	return nil
}

func (f *File) parseComponents(raw json.RawMessage) error {
	comps, err := parseObject(raw)
	if err == nil {
		err = comps.exact([]string{ComponentText}, []string{ComponentMTP, ComponentProposal})
	}
	if err != nil {
		return f.errf("", "directory: components: %v", err)
	}
	text, err := parseObject(comps.vals[ComponentText])
	if err == nil {
		err = text.exact([]string{"config", "resources"}, nil)
	}
	if err != nil {
		return f.errf("", "directory: components.text: %v", err)
	}
	cfgRaw := text.vals["config"]
	if kindOf(cfgRaw) != '{' {
		return f.errf("", "directory: components.text.config must be an object, got %s", typeName(cfgRaw))
	}
	dec := json.NewDecoder(bytes.NewReader(cfgRaw))
	dec.DisallowUnknownFields()
	var cfg qwen35.Config
	if err := dec.Decode(&cfg); err != nil {
		return f.errf("", "directory: components.text.config: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return f.errf("", "directory: components.text.%v", err)
	}
	f.config = &cfg
	res, err := asArray("resources", text.vals["resources"])
	if err != nil {
		return f.errf("", "directory: components.text: %v", err)
	}
	f.Resources = make([]string, 0, len(res))
	for i, r := range res {
		s, err := asString(fmt.Sprintf("resources[%d]", i), r)
		if err != nil {
			return f.errf("", "directory: components.text: %v", err)
		}
		f.Resources = append(f.Resources, s)
	}
	if comps.has(ComponentMTP) {
		m, err := parseObject(comps.vals[ComponentMTP])
		if err == nil {
			err = m.exact([]string{"num_layers"}, nil)
		}
		var n int64
		if err == nil {
			n, err = m.uint("num_layers")
		}
		if err != nil {
			return f.errf("", "directory: components.mtp: %v", err)
		}
		if n != int64(cfg.MTPNumHiddenLayers) || n == 0 {
			return f.errf("", "directory: components.mtp.num_layers %d must be positive and equal config mtp_num_hidden_layers %d", n, cfg.MTPNumHiddenLayers)
		}
		f.MTP = &MTPInfo{NumLayers: int(n)}
	}
	if comps.has(ComponentProposal) {
		p, err := parseObject(comps.vals[ComponentProposal])
		if err == nil {
			err = p.exact([]string{"rows", "source"}, nil)
		}
		info := &ProposalInfo{}
		if err == nil {
			info.Rows, err = p.uint("rows")
		}
		if err == nil {
			info.Source, err = p.str("source")
		}
		if err != nil {
			return f.errf("", "directory: components.proposal: %v", err)
		}
		if info.Rows == 0 {
			return f.errf("", "directory: components.proposal.rows must be positive")
		}
		f.Proposal = info
	}
	return nil
}

// checkID validates the object naming rules: non-empty slash-separated
// segments of printable ASCII without spaces.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("object id is empty")
	}
	if len(id) > 1024 {
		return fmt.Errorf("object id is longer than 1024 bytes")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return fmt.Errorf("object id %s has a character outside printable ASCII (or a space, quote or backslash)", termsafe.Quote(id))
		}
	}
	for _, seg := range strings.Split(id, "/") {
		if seg == "" {
			return fmt.Errorf("object id %s has an empty path segment", termsafe.Quote(id))
		}
	}
	return nil
}

// idPrefix is the first path segment an object of each component must have.
var idPrefix = map[string]string{
	ComponentText: "text", ComponentProposal: "text", ComponentMTP: "mtp", ComponentFrontend: "frontend",
}

func (f *File) parseObjectV3(i int, raw json.RawMessage) (Object, error) {
	e, err := f.parseObjectHead(i, raw, syntaxV3)
	if err != nil {
		return Object{}, err
	}
	o := &e.o
	if e.m.has("sha256") {
		if o.SHA256, err = e.m.str("sha256"); err != nil {
			return *o, e.bad("%v", err)
		}
		if !isLowerHex(o.SHA256, 64) {
			return *o, e.bad("sha256 %s is not 64 lowercase hex digits", termsafe.Quote(o.SHA256))
		}
	}
	if o.Kind == KindResource {
		if o.Component != ComponentFrontend {
			return *o, e.bad("resource component is %s, want %q", termsafe.Quote(o.Component), ComponentFrontend)
		}
		err = e.readResource(syntaxV3)
	} else {
		switch o.Component {
		case ComponentText, ComponentMTP, ComponentProposal:
		default:
			return *o, e.bad("unknown tensor component %s (want text, mtp or proposal)", termsafe.Quote(o.Component))
		}
		err = e.readTensor(syntaxV3)
	}
	if err != nil {
		return *o, e.bad("%v", err)
	}
	if p := idPrefix[o.Component]; !strings.HasPrefix(o.ID, p+"/") {
		return *o, e.bad("component %s objects must be named %s/...", termsafe.Quote(o.Component), p)
	}
	return *o, nil
}

// checkTensorGeometry checks layout against format and bytes against the
// exact encoded size.
func checkTensorGeometry(o *Object) error {
	if want := o.Format.LayoutOf(); o.Layout != want {
		return fmt.Errorf("layout %s does not match format %s (want %s)", o.Layout, o.Format, want)
	}
	size, err := format.EncodedSize(o.Format, o.Shape)
	if err != nil {
		return fmt.Errorf("shape %s is invalid for %s: %v", ShapeString(o.Shape), o.Format, err)
	}
	if o.Bytes != size {
		return fmt.Errorf("bytes %d != %d for %s %s", o.Bytes, size, o.Format, ShapeString(o.Shape))
	}
	return nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// checkComponents cross-checks the components block against the objects.
func (f *File) checkComponents() error {
	seen := map[string]bool{}
	for _, id := range f.Resources {
		o, ok := f.Object(id)
		if !ok {
			return f.errf("", "directory: components.text.resources names %s, which is not an object", termsafe.Quote(id))
		}
		if o.Kind != KindResource {
			return f.errf("", "directory: components.text.resources names %s, which is a %s", termsafe.Quote(id), o.Kind)
		}
		if seen[id] {
			return f.errf("", "directory: components.text.resources names %s twice", termsafe.Quote(id))
		}
		seen[id] = true
	}
	hasMTP, hasProposal := false, false
	for i := range f.Objects {
		o := &f.Objects[i]
		switch {
		case o.Kind == KindResource && !seen[o.ID]:
			return f.errf(o.ID, "resource is not listed in components.text.resources")
		case o.Component == ComponentMTP:
			hasMTP = true
		case o.Component == ComponentProposal:
			hasProposal = true
		}
	}
	if hasMTP != (f.MTP != nil) {
		if hasMTP {
			return f.errf("", "directory: mtp objects present but components.mtp is missing")
		}
		return f.errf("", "directory: components.mtp is present but there are no mtp objects")
	}
	if hasProposal != (f.Proposal != nil) {
		if hasProposal {
			return f.errf("", "directory: proposal objects present but components.proposal is missing")
		}
		return f.errf("", "directory: components.proposal is present but there are no proposal objects")
	}
	if f.Proposal != nil {
		for _, id := range []string{qwen35.NameDraftHead, qwen35.NameDraftIDs} {
			o, ok := f.Object(id)
			if !ok || o.Component != ComponentProposal || !o.IsTensor() {
				return f.errf("", "directory: components.proposal needs a proposal tensor %s", termsafe.Quote(id))
			}
			if len(o.Shape) == 0 || o.Shape[0] != f.Proposal.Rows || (id == qwen35.NameDraftIDs && (len(o.Shape) != 1 || o.Format != format.Int32)) {
				return f.errf(id, "shape %s %s does not match components.proposal.rows %d", ShapeString(o.Shape), o.Format, f.Proposal.Rows)
			}
		}
	}
	return nil
}
