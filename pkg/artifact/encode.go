package artifact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// dirSpec is everything the v3 directory records.
type dirSpec struct {
	name         string
	config       qwen35.Config
	resources    []string
	mtp          *MTPInfo
	proposal     *ProposalInfo
	objects      []Object
	payloadBytes int64
	metadata     map[string]any
	provenance   map[string]any
}

// encodeDirectory renders the directory as compact JSON with a fixed member
// order. The output depends only on d, so re-encoding after filling in
// same-length sha256 strings yields a same-length document.
func encodeDirectory(d *dirSpec) ([]byte, error) {
	var b bytes.Buffer
	str := func(s string) {
		q, _ := json.Marshal(s)
		b.Write(q)
	}
	num := func(v int64) { b.WriteString(strconv.FormatInt(v, 10)) }
	b.WriteString(`{"format":`)
	str(DirectoryFormat)
	b.WriteString(`,"version":`)
	num(Version)
	b.WriteString(`,"architecture":`)
	str(qwen35.Architecture)
	b.WriteString(`,"name":`)
	str(d.name)
	cfg, err := json.Marshal(d.config)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	b.WriteString(`,"components":{"text":{"config":`)
	b.Write(cfg)
	b.WriteString(`,"resources":[`)
	for i, r := range d.resources {
		if i > 0 {
			b.WriteByte(',')
		}
		str(r)
	}
	b.WriteString(`]}`)
	if d.mtp != nil {
		b.WriteString(`,"mtp":{"num_layers":`)
		num(int64(d.mtp.NumLayers))
		b.WriteByte('}')
	}
	if d.proposal != nil {
		b.WriteString(`,"proposal":{"rows":`)
		num(d.proposal.Rows)
		b.WriteString(`,"source":`)
		str(d.proposal.Source)
		b.WriteByte('}')
	}
	b.WriteString(`},"objects":[`)
	for i := range d.objects {
		o := &d.objects[i]
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":`)
		str(o.ID)
		b.WriteString(`,"kind":`)
		str(o.Kind)
		b.WriteString(`,"component":`)
		str(o.Component)
		if o.Kind == KindTensor {
			b.WriteString(`,"shape":`)
			b.WriteString(ShapeString(o.Shape))
			b.WriteString(`,"format":`)
			str(string(o.Format))
			b.WriteString(`,"layout":`)
			str(string(o.Layout))
		} else {
			b.WriteString(`,"encoding":`)
			str(o.Encoding)
		}
		b.WriteString(`,"offset":`)
		num(o.Offset)
		b.WriteString(`,"bytes":`)
		num(o.Bytes)
		if o.SHA256 != "" {
			b.WriteString(`,"sha256":`)
			str(o.SHA256)
		}
		b.WriteByte('}')
	}
	b.WriteString(`],"files":[{"payload_bytes":`)
	num(d.payloadBytes)
	b.WriteString(`}],"metadata":`)
	if err := writeFree(&b, d.metadata); err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	if d.provenance != nil {
		b.WriteString(`,"provenance":`)
		if err := writeFree(&b, d.provenance); err != nil {
			return nil, fmt.Errorf("encode provenance: %w", err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeFree(b *bytes.Buffer, m map[string]any) error {
	if m == nil {
		b.WriteString("{}")
		return nil
	}
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b.Write(js)
	return nil
}
