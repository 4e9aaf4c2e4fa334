package artifact

import (
	"encoding/json"
	"fmt"

	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// objectSyntax is what the v3 and v2 directories spell differently in an
// objects[] entry. parseObjectHead, readResource and readTensor read the
// members both versions share through it, so the two object parsers only
// hold what is their own (v3 components and sha256, v2 component naming).
type objectSyntax struct {
	nameMember      string             // the member naming the object: "id" (v3) or "name" (v2)
	checkName       func(string) error // the naming rule for that member
	component       bool               // a "component" member is read right after "kind" (v3)
	tensorMembers   []string           // the exact members of a tensor entry
	resourceMembers []string           // the exact members of a resource entry
	optional        []string           // optional members of either kind
	encoding        string             // the resource encoding, as this version spells it
	parseFormat     func(string) (format.Format, error)
	parseLayout     func(string) (format.Layout, error)
}

var (
	syntaxV3 = &objectSyntax{
		nameMember: "id", checkName: checkID, component: true,
		tensorMembers: tensorMembers, resourceMembers: resourceMembers, optional: optionalSHA,
		encoding: ResourceEncoding, parseFormat: format.Parse, parseLayout: format.ParseLayout,
	}
	syntaxV2 = &objectSyntax{
		nameMember: "name", checkName: checkNameV2,
		tensorMembers: v2TensorMembers, resourceMembers: v2ResourceMember,
		encoding: resourceEncodingV2, parseFormat: format.ParseV2, parseLayout: format.ParseLayoutV2,
	}
)

// checkNameV2 is the v2 naming rule: any non-empty string.
func checkNameV2(name string) error {
	if name == "" {
		return fmt.Errorf("name is empty")
	}
	return nil
}

// objectEntry is one objects[] element being parsed.
type objectEntry struct {
	f     *File
	where string // "objects[i]", for errors before the object has a name
	m     *jsonObject
	o     Object
}

// bad reports an error about the entry: by object name once it has one, by
// its index before.
func (e *objectEntry) bad(msg string, a ...any) error {
	if e.o.ID == "" {
		return e.f.errf("", "directory: %s: %s", e.where, fmt.Sprintf(msg, a...))
	}
	return e.f.errf(e.o.ID, msg, a...)
}

// parseObjectHead reads objects[i] up to its extent: the name, the kind and
// the exact member set for it, the component where the syntax has one, then
// offset and bytes. The returned error is already a *FormatError.
func (f *File) parseObjectHead(i int, raw json.RawMessage, s *objectSyntax) (*objectEntry, error) {
	e := &objectEntry{f: f, where: fmt.Sprintf("objects[%d]", i)}
	m, err := parseObject(raw)
	if err != nil {
		return nil, f.errf("", "directory: %s: %v", e.where, err)
	}
	e.m = m
	o := &e.o
	if m.has(s.nameMember) {
		if o.ID, err = m.str(s.nameMember); err == nil {
			err = s.checkName(o.ID)
		}
		if err != nil {
			o.ID = ""
			return nil, e.bad("%v", err)
		}
	}
	if !m.has("kind") {
		return nil, e.bad("missing member %q", "kind")
	}
	if o.Kind, err = m.str("kind"); err != nil {
		return nil, e.bad("%v", err)
	}
	switch o.Kind {
	case KindTensor:
		err = m.exact(s.tensorMembers, s.optional)
	case KindResource:
		err = m.exact(s.resourceMembers, s.optional)
	default:
		return nil, e.bad("unknown kind %s (want %q or %q)", termsafe.Quote(o.Kind), KindTensor, KindResource)
	}
	if err == nil && s.component {
		o.Component, err = m.str("component")
	}
	if err == nil {
		o.Offset, err = m.uint("offset")
	}
	if err == nil {
		o.Bytes, err = m.uint("bytes")
	}
	if err != nil {
		return nil, e.bad("%v", err)
	}
	return e, nil
}

// readResource reads a resource entry's encoding (stored in the v3 spelling)
// and checks that it has bytes.
func (e *objectEntry) readResource(s *objectSyntax) error {
	enc, err := e.m.str("encoding")
	if err != nil {
		return err
	}
	if enc != s.encoding {
		return fmt.Errorf("unknown resource encoding %s (want %q)", termsafe.Quote(enc), s.encoding)
	}
	e.o.Encoding = ResourceEncoding
	if e.o.Bytes == 0 {
		return fmt.Errorf("resource bytes must be positive")
	}
	return nil
}

// readTensor reads a tensor entry's shape, format and layout and checks its
// geometry.
func (e *objectEntry) readTensor(s *objectSyntax) error {
	o := &e.o
	var err error
	if o.Shape, err = asShape(e.m.vals["shape"]); err != nil {
		return err
	}
	fs, err := e.m.str("format")
	if err != nil {
		return err
	}
	if o.Format, err = s.parseFormat(fs); err != nil {
		return err
	}
	ls, err := e.m.str("layout")
	if err != nil {
		return err
	}
	if o.Layout, err = s.parseLayout(ls); err != nil {
		return err
	}
	return checkTensorGeometry(o)
}

// parseObjects parses the directory's objects array with parse, rejecting an
// empty array and duplicate names (called a noun: "id" or "name"), and
// fills f.Objects and f.byID.
func (f *File) parseObjects(raw json.RawMessage, parse func(int, json.RawMessage) (Object, error), noun string) error {
	elems, err := asArray("objects", raw)
	if err != nil {
		return f.errf("", "directory: %v", err)
	}
	if len(elems) == 0 {
		return f.errf("", "directory: objects is empty")
	}
	f.Objects = make([]Object, 0, len(elems))
	f.byID = make(map[string]int, len(elems))
	for i, e := range elems {
		o, err := parse(i, e)
		if err != nil {
			return err
		}
		if _, dup := f.byID[o.ID]; dup {
			return f.errf(o.ID, "duplicate object %s", noun)
		}
		f.byID[o.ID] = len(f.Objects)
		f.Objects = append(f.Objects, o)
	}
	return nil
}
