package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/qwen35"
)

// opProfile wraps a backend and times its ops while on: each matmul under
// its weight's shape and format, the rest under the op's name. The CPU
// backend's ops are synchronous calls, so wall time per call is the op's
// time (on CUDA it would be the launch only). Ops not overridden here run
// untimed and show up as the step's "other".
type opProfile struct {
	backend.Backend
	on    bool
	stats map[string]*opStat
}

type opStat struct {
	bytes int64           // weight bytes streamed (matmuls)
	times []time.Duration // one per call
}

func newOpProfile(be backend.Backend) *opProfile {
	return &opProfile{Backend: be, stats: map[string]*opStat{}}
}

// timed runs op and adds its wall time to key.
func (p *opProfile) timed(key string, bytes int64, op func()) {
	if !p.on {
		op()
		return
	}
	t0 := time.Now()
	op()
	d := time.Since(t0)
	s := p.stats[key]
	if s == nil {
		s = &opStat{}
		p.stats[key] = s
	}
	s.bytes += bytes
	s.times = append(s.times, d)
}

func (p *opProfile) MatMul(y, x backend.Tensor, w *backend.Weight, acc bool) {
	p.timed(fmt.Sprintf("matmul [%d,%d] %s", w.N, w.K, w.Format), w.Bytes, func() { p.Backend.MatMul(y, x, w, acc) })
}

func (p *opProfile) RMSNorm(y, x backend.Tensor, w backend.View, eps float32, zc bool) {
	p.timed("rmsnorm", 0, func() { p.Backend.RMSNorm(y, x, w, eps, zc) })
}

func (p *opProfile) GatedRMSNorm(y, o, z backend.Tensor, w backend.View, eps float32) {
	p.timed("gated_rmsnorm", 0, func() { p.Backend.GatedRMSNorm(y, o, z, w, eps) })
}

func (p *opProfile) DeltaRecurrent(o, q, k, v, g, beta backend.Tensor, st backend.StateSlots, in backend.View, out int) {
	p.timed("gdn_recurrent", 0, func() { p.Backend.DeltaRecurrent(o, q, k, v, g, beta, st, in, out) })
}

func (p *opProfile) Conv1DSiLU(y, x backend.Tensor, w backend.View, kw int, st backend.StateSlots, in backend.View, out int) {
	p.timed("conv1d_silu", 0, func() { p.Backend.Conv1DSiLU(y, x, w, kw, st, in, out) })
}

func (p *opProfile) Attention(out, q backend.Tensor, kv backend.KVLayer, pos backend.View, scale float32) {
	p.timed("attention", 0, func() { p.Backend.Attention(out, q, kv, pos, scale) })
}

func (p *opProfile) Embed(out backend.Tensor, w *backend.Weight, ids backend.View) {
	p.timed("embed", 0, func() { p.Backend.Embed(out, w, ids) })
}

func (p *opProfile) L2Norm(y, x backend.Tensor, scale float32) {
	p.timed("l2norm", 0, func() { p.Backend.L2Norm(y, x, scale) })
}

func (p *opProfile) RoPE(x backend.Tensor, pos backend.View, rotaryDim int, theta float64) {
	p.timed("rope", 0, func() { p.Backend.RoPE(x, pos, rotaryDim, theta) })
}

func (p *opProfile) SigmoidMul(y, x, g backend.Tensor) {
	p.timed("sigmoid_mul", 0, func() { p.Backend.SigmoidMul(y, x, g) })
}

func (p *opProfile) SwiGLU(y, g, u backend.Tensor) {
	p.timed("swiglu", 0, func() { p.Backend.SwiGLU(y, g, u) })
}

func (p *opProfile) Add(y, a, b backend.Tensor) {
	p.timed("add", 0, func() { p.Backend.Add(y, a, b) })
}

func (p *opProfile) Argmax(out backend.View, x backend.Tensor) {
	p.timed("argmax", 0, func() { p.Backend.Argmax(out, x) })
}

func (p *opProfile) GDNGate(g, beta, a, b backend.Tensor, aLog, dtBias backend.View) {
	p.timed("gdn_gate", 0, func() { p.Backend.GDNGate(g, beta, a, b, aLog, dtBias) })
}

func (p *opProfile) KVAppend(kv backend.KVLayer, k, v backend.Tensor, pos backend.View) {
	p.timed("kv_append", 0, func() { p.Backend.KVAppend(kv, k, v, pos) })
}

// report is the profile of steps decode steps that took total: one line
// per key, slowest first, then the step's untimed rest.
func (p *opProfile) report(steps int, total time.Duration) string {
	keys := make([]string, 0, len(p.stats))
	var timed time.Duration
	sum := map[string]time.Duration{}
	for k, s := range p.stats {
		keys = append(keys, k)
		for _, d := range s.times {
			sum[k] += d
		}
		timed += sum[k]
	}
	sort.Slice(keys, func(i, j int) bool { return sum[keys[i]] > sum[keys[j]] })
	perStep := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 / float64(steps) }
	var b strings.Builder
	fmt.Fprintf(&b, "%d steps, %.3f ms/step: %.3f in the ops below, %.3f other\n", steps, perStep(total), perStep(timed), perStep(total-timed))
	fmt.Fprintf(&b, "| op | calls/step | ms/step | %% of step | µs/call min / median / p90 | GB/s |\n|---|---|---|---|---|---|\n")
	for _, k := range keys {
		s := p.stats[k]
		t := append([]time.Duration(nil), s.times...)
		sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		gbs := "-"
		if s.bytes > 0 {
			gbs = fmt.Sprintf("%.1f", float64(s.bytes)/float64(sum[k].Nanoseconds()))
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.3f | %.1f | %.1f / %.1f / %.1f | %s |\n", k, float64(len(s.times))/float64(steps),
			perStep(sum[k]), 100*float64(sum[k])/float64(total), us(t[0]), us(t[len(t)/2]), us(t[len(t)*9/10]), gbs)
	}
	return b.String()
}

// profileDecode prefills 4 tokens, runs 8 untimed decode steps, then
// steps timed ones, and returns the profile and the steps' wall time.
func profileDecode(tb testing.TB, w Weights, be backend.Backend, vocab, steps int) (*opProfile, time.Duration) {
	tb.Helper()
	p := newOpProfile(be)
	e, err := New(w, p, Options{MaxContext: 512, PrefillChunk: 128})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	s, err := e.NewSequence()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Prefill([]int32{1, 2, 3, 4}, false); err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := s.Decode(int32((100 + i) % vocab)); err != nil {
			tb.Fatal(err)
		}
	}
	p.on = true
	t0 := time.Now()
	for i := 0; i < steps; i++ {
		if _, err := s.Decode(int32((1000 + i) % vocab)); err != nil {
			tb.Fatal(err)
		}
	}
	return p, time.Since(t0)
}

// decodeMatMuls is the number of matmuls of one decode step: per full
// attention layer q, k, v, o; per GDN layer in_proj qkv, z, a, b and
// out_proj; per layer the MLP's gate, up and down; then the head.
func decodeMatMuls(c qwen35.Config) int {
	n := 1
	for _, t := range c.LayerTypes {
		if t == qwen35.FullAttention {
			n += 4 + 3
		} else {
			n += 5 + 3
		}
	}
	return n
}

// TestOpProfileCountsDecodeOps: the decode op profile sees every matmul
// of a step once, under its weight's shape, and the per-layer ops once per
// layer of their kind, so its per-step times add up what a step runs.
func TestOpProfileCountsDecodeOps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	w := newTestWeights(r, tinyConfig(false), format.BF16)
	const steps = 3
	p, total := profileDecode(t, w, newBackend(t, "auto"), w.cfg.VocabSize, steps)
	calls := map[string]int{}
	for k, s := range p.stats {
		kind, _, _ := strings.Cut(k, " ")
		calls[kind] += len(s.times)
	}
	gdn, full := 0, 0
	for _, lt := range w.cfg.LayerTypes {
		if lt == qwen35.FullAttention {
			full++
		} else {
			gdn++
		}
	}
	want := map[string]int{"matmul": decodeMatMuls(w.cfg), "gdn_recurrent": gdn, "conv1d_silu": gdn, "attention": full,
		"gated_rmsnorm": gdn}
	for kind, n := range want {
		if got := calls[kind]; got != n*steps {
			t.Errorf("%s: %d calls in %d steps, want %d a step", kind, got, steps, n)
		}
	}
	head := fmt.Sprintf("matmul [%d,%d] %s", w.cfg.VocabSize, w.cfg.HiddenSize, format.BF16)
	if s := p.stats[head]; s == nil || len(s.times) != steps {
		t.Errorf("no head matmul %q once a step in %v", head, p.stats)
	}
	if rep := p.report(steps, total); !strings.Contains(rep, "| "+head+" |") {
		t.Errorf("report lacks the head's row:\n%s", rep)
	}
}

// BenchmarkDecodeOps profiles decode on an artifact: where a step's time
// goes, op by op (docs/PERF.md "Fourteenth session"). It needs
// NINFER_BENCH_MODEL (a .ninfer path, e.g. the 0.8B-shape models that
// scripts/bench-vs-llamacpp.sh writes under build/bench-vs-llamacpp/);
// NINFER_BENCH_THREADS sets the CPU threads (default: all cores),
// NINFER_BENCH_ACTIVATIONS the matmul activations (auto, int8, fp32; default
// auto, as ninfer-bench) and NINFER_CPU_ISA the level:
//
//	NINFER_BENCH_MODEL=$PWD/build/bench-vs-llamacpp/qwen3.5-0.8b/model-q8.ninfer \
//	  go test ./pkg/engine -run '^$' -bench DecodeOps -benchtime 64x -v
func BenchmarkDecodeOps(b *testing.B) {
	path := os.Getenv("NINFER_BENCH_MODEL")
	if path == "" {
		b.Skip("set NINFER_BENCH_MODEL to a .ninfer artifact")
	}
	w, err := loader.OpenWeights(path)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	threads := runtime.NumCPU()
	if s := os.Getenv("NINFER_BENCH_THREADS"); s != "" {
		if _, err := fmt.Sscan(s, &threads); err != nil {
			b.Fatalf("NINFER_BENCH_THREADS=%q: %v", s, err)
		}
	}
	be, _, _, err := loader.NewBackend("cpu", threads)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	act := os.Getenv("NINFER_BENCH_ACTIVATIONS")
	if act == "" {
		act = "auto"
	}
	if err := backend.SetActivations(be, act); err != nil {
		b.Fatal(err)
	}
	p, total := profileDecode(b, w, be, w.Config().VocabSize, b.N)
	b.ReportMetric(float64(b.N)/total.Seconds(), "tok/s")
	b.Logf("%s (%s, %d threads, %s activations)\n%s", path, be.Name(), threads, act, p.report(b.N, total))
}
