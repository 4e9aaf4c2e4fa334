package plan

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// group formats n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

// WriteTable writes a readable markdown table of the plan's breakdown.
func (p *Plan) WriteTable(w io.Writer) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft))
	t.Header("section", "item", "bytes", "MiB")
	var rows [][]string
	bytesRow := func(sec, item string, n int64) { rows = append(rows, []string{sec, item, group(n), mib(n)}) }
	textRow := func(sec, item, v string) { rows = append(rows, []string{sec, item, v, ""}) }
	o, m, r := p.Options, p.Memory, p.Resolution

	if o.DeviceTotalBytes > 0 {
		bytesRow("budget", "device total", o.DeviceTotalBytes)
		bytesRow("budget", "runtime overhead (CUDA context)", p.RuntimeOverhead)
	}
	bytesRow("budget", fmt.Sprintf("weights (%d device objects, 256-B aligned)", len(p.Weights.Terms)), p.Weights.Capacity)
	bytesRow("budget", "available after weights (A)", m.AvailableAfterWeightsBytes)

	textRow("kv", "max context (tokens)", group(m.MaxContext))
	textRow("kv", "kv capacity ("+m.KVCapacityMode+")", fmt.Sprintf("%s tokens, %d page groups", group(m.KVCapacity), m.KVCapacityPageGroups))
	textRow("kv", "kv cache", fmt.Sprintf("%s, %d B per token·kv_head", m.KVCache, p.KV.BytesPerTokenHead))
	spec := string(o.Spec)
	if o.Spec == SpecMTP {
		spec = fmt.Sprintf("mtp k=%d", o.DraftTokens)
		if o.LMHeadDraft {
			spec += ", optimized proposal head"
		}
	}
	textRow("kv", "speculation", spec)

	for _, tm := range p.Sequence.Terms {
		item := tm.Name
		switch tm.Name {
		case "kv.text":
			item = fmt.Sprintf("kv.text (%d layers × %d pages)", p.KV.TextLayers, p.KV.Pages)
		case "kv.mtp":
			item = fmt.Sprintf("kv.mtp (%d layers × %d pages)", p.KV.MTPLayers, p.KV.MTPPages)
			if o.ReferenceMTPKV {
				item = fmt.Sprintf("kv.mtp (%d layers × %d pages; reference formula)", p.KV.MTPLayers, p.KV.MTPPages)
			}
		case "gdn.ssm_state", "gdn.conv_state":
			item = fmt.Sprintf("%s (%d layers × %d slots)", tm.Name, p.GDN.Layers, p.GDN.Slots)
		}
		bytesRow("sequence", item, tm.Bytes)
	}
	bytesRow("sequence", "total (kv payload "+group(m.KVPayloadBytes)+")", p.Sequence.Capacity)

	if o.WorkspaceBytesOverride > 0 {
		bytesRow("workspace", "measured (override)", o.WorkspaceBytesOverride)
	} else {
		for _, ph := range p.Phases {
			bytesRow("workspace", "phase "+ph.Name, ph.Capacity)
		}
	}
	capItem := "capacity (largest phase)"
	if o.Spec == SpecMTP {
		capItem = "capacity (largest target or mtp phase)"
	}
	if p.OpScratch.Bytes > 0 && o.WorkspaceBytesOverride <= 0 {
		for _, n := range p.OpScratchNeeds {
			bytesRow("workspace", "op scratch need: "+strings.TrimPrefix(n.Name, "op_scratch."), n.Bytes)
		}
		bytesRow("workspace", "op_scratch (largest need, after the phases)", p.OpScratch.Bytes)
		capItem = strings.TrimSuffix(capItem, ")") + " + op scratch)"
	}
	bytesRow("workspace", capItem, p.Workspace)
	if p.ScratchBytes > 0 {
		bytesRow("backend", "kernel scratch (outside the arenas, not reserved)", p.ScratchBytes)
	}
	bytesRow("graphs", "cuda graph allowance", p.GraphAllowanceBytes)

	bytesRow("reservation", "minimum runtime reservation", r.MinimumReservationBytes)
	bytesRow("reservation", "runtime reservation", r.ReservationBytes)
	if r.Mode == "auto" {
		item := "auto headroom (min(1 GiB, A/4))"
		switch {
		case o.HeadroomBytes < 0:
			item = "auto headroom (none)"
		case o.HeadroomBytes > 0:
			item = "auto headroom (--headroom)"
		}
		bytesRow("reservation", item, r.HeadroomBytes)
	}
	bytesRow("reservation", "planned slack (A − reservation)", r.PlannedSlackBytes)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}
