package plan

import (
	"fmt"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

// CheckProposalHead refuses --lm-head-draft for an artifact's objects
// without the proposal head, as ninfer-run and ninfer-bench do when they
// load the MTP head (engine.LoadMTP): a plan that counted no proposal head
// would describe a run that cannot start. (New does not check it: it also
// plans synthetic object lists.)
func CheckProposalHead(objects []Object, o Options) error {
	if !o.LMHeadDraft || o.Spec == SpecNone || o.Spec == "" {
		return nil
	}
	for _, obj := range objects {
		if obj.ID == qwen35.NameDraftHead {
			return nil
		}
	}
	return fmt.Errorf("proposal head (--lm-head-draft) needs %s (convert with --draft-head N), but the weights have none", qwen35.NameDraftHead)
}
