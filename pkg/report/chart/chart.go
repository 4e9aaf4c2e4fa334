// Package chart draws ninfer-bench results as pictures (SVG or PNG) with
// gonum.org/v1/plot: prefill and decode tok/s against the context depth
// (ninfer-bench -d) for each run, or, when no test has a depth, a grouped
// bar chart of every test's tok/s. Points are the mean of the per-rep rates
// and error bars their sample standard deviation (none with one rep).
//
// It is a package of its own so that only ninfer-report links the plotting
// library; pkg/report stays small for ninfer-bench.
package chart

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/report"
)

// Picture formats.
const (
	FormatSVG = "svg"
	FormatPNG = "png"
)

// IsFormat reports whether format is a picture format of this package.
func IsFormat(format string) bool { return format == FormatSVG || format == FormatPNG }

// PNG resolution: 144 dpi keeps text sharp on high-density screens.
const pngDPI = 144

// HasDepth reports whether any test of runs ran at a context depth > 0.
func HasDepth(runs []report.Run) bool {
	for i := range runs {
		for _, t := range runs[i].Document.Tests {
			if t.NDepth > 0 {
				return true
			}
		}
	}
	return false
}

// Render draws runs in format (svg or png): the depth chart when any test
// has a depth, else the grouped bar chart.
func Render(format string, runs []report.Run) ([]byte, error) {
	if !IsFormat(format) {
		return nil, fmt.Errorf("unknown picture format %q (want svg or png)", format)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("the input holds no run")
	}
	names := RunNames(runs)
	var panels []*plot.Plot
	var err error
	title := "ninfer-bench throughput"
	if HasDepth(runs) {
		title = "ninfer-bench throughput against context depth"
		panels, err = depthPanels(runs, names)
	} else {
		var p *plot.Plot
		p, err = barPanel(runs, names)
		panels = []*plot.Plot{p}
	}
	if err != nil {
		return nil, err
	}
	if sub := environmentLine(runs); sub != "" {
		title += " — " + sub
	}
	return draw2(format, title, panels)
}

// Recipe names the weight formats of a run (report.Recipe): the recipe
// name from the artifact's file name, else the quantized load.formats.
func Recipe(d *benchfmt.Document) string { return report.Recipe(d) }

// specText is the run's speculative setting: "no spec" or "mtp k=2".
func specText(c *benchfmt.Config) string {
	if c.SpeculativeBackend == "" || c.SpeculativeBackend == "none" {
		return "no spec"
	}
	s := fmt.Sprintf("%s k=%d", c.SpeculativeBackend, c.DraftTokens)
	if c.ProposalHead != "" && c.ProposalHead != "full" {
		s += " " + c.ProposalHead + "-head"
	}
	return s
}

// RunNames are the legend names of runs: "model recipe spec"
// (tiny-shakespeare q8 no spec), with the KV cache, the backend and
// finally the run id added where that alone would leave two runs alike.
func RunNames(runs []report.Run) []string {
	names := make([]string, len(runs))
	for i := range runs {
		d := &runs[i].Document
		names[i] = fmt.Sprintf("%s %s %s", d.Load.Name, Recipe(d), specText(&d.Config))
	}
	extras := []func(r *report.Run) string{
		func(r *report.Run) string { return "kv " + r.Document.Config.KVCache },
		func(r *report.Run) string { return backendOf(&r.Document) },
		func(r *report.Run) string { return r.RunID },
	}
	for _, extra := range extras {
		dup := duplicates(names)
		if len(dup) == 0 {
			break
		}
		for i := range names {
			if dup[names[i]] {
				names[i] += ", " + extra(&runs[i])
			}
		}
	}
	return names
}

func duplicates(names []string) map[string]bool {
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	out := map[string]bool{}
	for n, c := range seen {
		if c > 1 {
			out[n] = true
		}
	}
	return out
}

func backendOf(d *benchfmt.Document) string {
	if b := d.Environment.Backend; b != nil && *b != "" {
		return *b
	}
	if d.Environment.GPUName != nil {
		return "cuda"
	}
	return "?"
}

// environmentLine describes where the runs ran when they all ran on the
// same device: "cpu AMD EPYC, 2 threads" or the GPU name; "" otherwise.
func environmentLine(runs []report.Run) string {
	desc := func(d *benchfmt.Document) string {
		e := d.Environment
		if e.GPUName != nil {
			return *e.GPUName
		}
		s := backendOf(d)
		if e.CPUName != nil && *e.CPUName != "" {
			s += " " + *e.CPUName
		}
		if e.Threads != nil {
			s += fmt.Sprintf(", %d threads", *e.Threads)
		}
		return s
	}
	first := desc(&runs[0].Document)
	for i := 1; i < len(runs); i++ {
		if desc(&runs[i].Document) != first {
			return ""
		}
	}
	return first
}

// point is one test's mean rate with its spread.
type point struct {
	x, y, sd float64
}

type points []point

func (p points) Len() int                    { return len(p) }
func (p points) XY(i int) (float64, float64) { return p[i].x, p[i].y }
func (p points) YError(i int) (float64, float64) {
	return p[i].sd, p[i].sd
}

// stat returns the mean and stddev of a test's series (the stddev is 0
// with fewer than two reps: no spread was measured); ok is false when the
// test has no value for the metric.
func stat(t *benchfmt.Test, m report.Metric) (mean, sd float64, ok bool) {
	xs := report.Series(t, m)
	if len(xs) == 0 {
		return 0, 0, false
	}
	mean, sd, _ = report.MeanStddev(xs)
	if len(xs) < 2 {
		sd = 0
	}
	return mean, sd, true
}

// panelSpec is one throughput panel: which tests and which series.
type panelSpec struct {
	title, ylabel string
	metric        report.Metric
	has           func(kind string) bool
}

var panelSpecs = []panelSpec{
	{"Prefill (pp tests)", "prefill throughput (tokens/s)", report.PrefillTokS, benchfmt.HasPrefill},
	{"Decode (tg tests)", "decode throughput (output tokens/s)", report.DecodeOutputTokS, benchfmt.HasDecode},
}

// depthPanels draws one panel per throughput (prefill, decode) with one
// line per run and test shape: mean tok/s against n_depth, ±1 stddev bars.
func depthPanels(runs []report.Run, names []string) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, ps := range panelSpecs {
		p := newPlot(ps.title, "context depth (tokens already in the KV cache)", ps.ylabel)
		depths := map[float64]bool{}
		n := 0
		for ri := range runs {
			d := &runs[ri].Document
			// One series per test label (pp64, pp512, ...) of this run.
			var labels []string
			byLabel := map[string]points{}
			for ti := range d.Tests {
				t := &d.Tests[ti]
				if !ps.has(t.Kind) {
					continue
				}
				mean, sd, ok := stat(t, ps.metric)
				if !ok {
					continue
				}
				if _, seen := byLabel[t.Label]; !seen {
					labels = append(labels, t.Label)
				}
				byLabel[t.Label] = append(byLabel[t.Label], point{float64(t.NDepth), mean, sd})
				depths[float64(t.NDepth)] = true
			}
			for _, label := range labels {
				pts := byLabel[label]
				sort.SliceStable(pts, func(i, j int) bool { return pts[i].x < pts[j].x })
				name := names[ri]
				if len(labels) > 1 {
					name += " " + label
				} else {
					name += " (" + label + ")"
				}
				if err := addLine(p, n, name, pts); err != nil {
					return nil, err
				}
				n++
			}
		}
		if n == 0 {
			continue // e.g. a tg-only sweep has no prefill panel
		}
		var ticks []plot.Tick
		for x := range depths {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
		sort.Slice(ticks, func(i, j int) bool { return ticks[i].Value < ticks[j].Value })
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		pad := (p.X.Max - p.X.Min) * 0.04
		p.X.Min, p.X.Max = p.X.Min-pad, p.X.Max+pad
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no test has a prefill or decode rate to plot")
	}
	return out, nil
}

func addLine(p *plot.Plot, i int, name string, pts points) error {
	line, marks, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	c := plotutil.Color(i)
	line.Color = c
	line.Width = vg.Points(1.5)
	line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
	marks.Color = c
	marks.Shape = plotutil.Shape(i)
	marks.Radius = vg.Points(3)
	p.Add(line, marks)
	if hasSpread(pts) {
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		bars.Color = c
		bars.Width = vg.Points(1)
		bars.CapWidth = vg.Points(6)
		p.Add(bars)
	}
	p.Legend.Add(name, line, marks)
	return nil
}

func hasSpread(pts points) bool {
	for _, q := range pts {
		if q.sd > 0 {
			return true
		}
	}
	return false
}

// barPanel is the grouped bar chart without a depth axis: one group per
// test row (pp+tg tests give a pp and a tg row), one bar per run.
func barPanel(runs []report.Run, names []string) (*plot.Plot, error) {
	type row struct {
		suffix string
		m      report.Metric
	}
	var cats []string
	catIdx := map[string]int{}
	vals := make([]map[int]point, len(runs))
	for ri := range runs {
		vals[ri] = map[int]point{}
		d := &runs[ri].Document
		seen := map[string]int{}
		for ti := range d.Tests {
			t := &d.Tests[ti]
			var rows []row
			switch t.Kind {
			case benchfmt.KindPP:
				rows = []row{{"", report.PrefillTokS}}
			case benchfmt.KindTG:
				rows = []row{{"", report.DecodeOutputTokS}}
			default:
				rows = []row{{" (pp)", report.PrefillTokS}, {" (tg)", report.DecodeOutputTokS}}
			}
			for _, r := range rows {
				cat := t.Label + r.suffix
				seen[cat]++
				if n := seen[cat]; n > 1 { // a repeated test of the same run
					cat += fmt.Sprintf(" #%d", n)
				}
				mean, sd, ok := stat(t, r.m)
				if !ok {
					continue
				}
				ci, have := catIdx[cat]
				if !have {
					ci = len(cats)
					catIdx[cat] = ci
					cats = append(cats, cat)
				}
				vals[ri][ci] = point{float64(ci), mean, sd}
			}
		}
	}
	if len(cats) == 0 {
		return nil, fmt.Errorf("no test has a prefill or decode rate to plot")
	}
	p := newPlot("Throughput per test (pp: prefill, tg: decode)", "test", "throughput (tokens/s)")
	groupW := vg.Points(min(60, 360/float64(len(cats))))
	barW := groupW / vg.Length(len(runs))
	for ri := range runs {
		v := make(plotter.Values, len(cats))
		errs := make(points, 0, len(cats))
		for ci := range cats {
			if q, ok := vals[ri][ci]; ok {
				v[ci] = q.y
				errs = append(errs, q)
			}
		}
		bars, err := plotter.NewBarChart(v, barW)
		if err != nil {
			return nil, err
		}
		c := plotutil.Color(ri)
		bars.Color = c
		bars.LineStyle.Width = vg.Points(0.5)
		bars.Offset = barW*vg.Length(ri) - groupW/2 + barW/2
		p.Add(bars)
		if hasSpread(errs) {
			eb, err := plotter.NewYErrorBars(errs)
			if err != nil {
				return nil, err
			}
			eb.Width = vg.Points(1)
			eb.CapWidth = barW / 3
			p.Add(&offsetErrorBars{eb, bars.Offset})
		}
		p.Legend.Add(names[ri], bars)
	}
	// The legend goes above the bars, in headroom kept free for it.
	top := 0.0
	for ri := range vals {
		for _, q := range vals[ri] {
			top = max(top, q.y+q.sd)
		}
	}
	p.Y.Max = top * (1.1 + 0.07*float64(len(runs)))
	p.Legend.Top, p.Legend.Left = true, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), -vg.Points(20) // below the title
	p.NominalX(cats...)
	p.X.Label.Text = "test (tokens: pp<P> prompt, tg<G> generated)"
	return p, nil
}

// offsetErrorBars draws error bars shifted by the bar chart's offset, so
// that they sit on their bar within a group.
type offsetErrorBars struct {
	*plotter.YErrorBars
	off vg.Length
}

func (e *offsetErrorBars) Plot(c draw.Canvas, p *plot.Plot) {
	c.Rectangle.Min.X += e.off
	c.Rectangle.Max.X += e.off
	e.YErrorBars.Plot(c, p)
}

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Y.Min = 0 // rates start at zero: no exaggerated differences
	p.Y.Tick.Marker = rateTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = vg.Points(6)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.Padding = vg.Points(3)
	return p
}

// draw2 lays the panels out side by side under the title and encodes the
// picture.
func draw2(format, title string, panels []*plot.Plot) ([]byte, error) {
	w := vg.Length(len(panels)) * 13 * vg.Centimeter
	if len(panels) == 1 {
		w = 18 * vg.Centimeter
	}
	h := 11 * vg.Centimeter
	var canvas vg.CanvasWriterTo
	switch format {
	case FormatSVG:
		canvas = vgsvg.New(w, h)
	default:
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))}
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	titleH := vg.Points(22)
	sty := text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, vg.Points(12)),
		XAlign:  draw.XCenter,
		YAlign:  draw.YTop,
		Handler: plot.DefaultTextHandler,
	}
	sty.Font.Weight = xfont.WeightBold
	dc.FillText(sty, vg.Point{X: w / 2, Y: h - vg.Points(6)}, title)

	body := draw.Crop(dc, 0, 0, 0, -titleH)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	grid := [][]*plot.Plot{panels}
	cs := plot.Align(grid, tiles, body)
	for i, p := range panels {
		p.Draw(cs[0][i])
	}
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode %s: %w", format, err)
	}
	return buf.Bytes(), nil
}

// rateTicks puts about five major ticks on round numbers (1, 2, 2.5 or 5
// times a power of ten) labelled without decimals that carry nothing, and
// four minor ticks between them.
type rateTicks struct{}

func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if raw <= m*mag {
			step = m * mag
			break
		}
	}
	var out []plot.Tick
	minor := step / 5
	for i := math.Ceil(lo / minor); i*minor <= hi+minor*1e-9; i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if r := math.Mod(math.Abs(v)+minor/2, step); r < minor {
			t.Label = strconv.FormatFloat(math.Round(v/step)*step, 'f', -1, 64)
		}
		out = append(out, t)
	}
	return out
}
