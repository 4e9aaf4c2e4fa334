package plan

import (
	"fmt"
	"strings"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// Object is one artifact object as the planner sees it.
type Object struct {
	ID        string // e.g. "text/layers/3/attention/q_proj"
	Component string // "text", "mtp", "proposal", "vision", ...
	Bytes     int64  // encoded size
	Host      bool   // a host placement (frontend resource): never on the device
}

// IsProposal reports whether o belongs to the optimized proposal head
// (component "proposal", or a text/draft_head* id inside component text).
func (o Object) IsProposal() bool {
	return o.Component == qwen35.ComponentProposal || strings.HasPrefix(o.ID, qwen35.NameDraftHead)
}

// SelectDevice returns the objects placed on the device, in input order:
// text always; mtp/* only with spec mtp; the proposal head only with a spec
// and lmHeadDraft. Host objects and the vision/dflash groups are never
// placed. An object of an unknown component is an error.
func SelectDevice(objs []Object, spec Spec, lmHeadDraft bool) ([]Object, error) {
	var out []Object
	for _, o := range objs {
		if o.Bytes < 0 {
			return nil, fmt.Errorf("object %s: negative size %d", o.ID, o.Bytes)
		}
		if o.Host {
			continue
		}
		var on bool
		switch {
		case o.IsProposal():
			on = spec != SpecNone && spec != "" && lmHeadDraft
		case o.Component == qwen35.ComponentText:
			on = true
		case o.Component == qwen35.ComponentMTP:
			on = spec == SpecMTP
		case o.Component == "vision" || o.Component == "dflash" || o.Component == "dflash2":
			on = false
		default:
			return nil, fmt.Errorf("object %s: unknown component %q", o.ID, o.Component)
		}
		if on {
			out = append(out, o)
		}
	}
	return out, nil
}
