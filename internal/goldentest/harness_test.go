package goldentest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ninfer/ninfer/pkg/backend"
	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/golden"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// tmpRoot holds the converted artifacts of the whole test binary (one per
// case × preset, converted once on first use).
var tmpRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ninfer-goldentest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "goldentest:", err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	if cudaBackend != nil {
		cudaBackend.Close()
	}
	if sharedBackend != nil {
		sharedBackend.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// onceCache memoises a fallible computation per key across tests.
type onceCache[T any] struct {
	mu sync.Mutex
	m  map[string]*onceEntry[T]
}

type onceEntry[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (c *onceCache[T]) get(key string, f func() (T, error)) (T, error) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*onceEntry[T]{}
	}
	e, ok := c.m[key]
	if !ok {
		e = &onceEntry[T]{}
		c.m[key] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.v, e.err = f() })
	return e.v, e.err
}

var (
	casesCache     onceCache[[]*golden.Case]
	artifactsCache onceCache[artifactInfo]
	traceCache     onceCache[[][]float32]
	backendCache   onceCache[backend.Backend]
)

// ExtraEnv names the environment variable that adds golden cases to every
// test of this package: a list of directories (separated like PATH), each
// either a case directory (holding golden.json) or a directory of case
// directories in the testdata/golden layout (scripts/golden/make_golden.py
// --extra-seed N --out DIR writes such cases). Every bound of the tests is
// derived from the case's own data (derived_test.go), so an extra case needs
// no calibrated constants.
const ExtraEnv = "NINFER_GOLDEN_EXTRA"

// caseDirs returns the committed case directories followed by those named
// by ExtraEnv.
func caseDirs() ([]string, error) {
	root, err := golden.Root()
	if err != nil {
		return nil, err
	}
	dirs, err := golden.Cases(root)
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no golden cases under %s", root)
	}
	for _, e := range filepath.SplitList(os.Getenv(ExtraEnv)) {
		if e == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(e, golden.ManifestName)); err == nil {
			dirs = append(dirs, e)
			continue
		}
		more, err := golden.Cases(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ExtraEnv, err)
		}
		if len(more) == 0 {
			return nil, fmt.Errorf("%s: no golden case (directory with %s) in %s", ExtraEnv, golden.ManifestName, e)
		}
		dirs = append(dirs, more...)
	}
	return dirs, nil
}

// cases loads every committed golden case and those named by ExtraEnv
// (once). Case names must be unique: they key the artifact and trace caches.
func cases(t *testing.T) []*golden.Case {
	t.Helper()
	cs, err := casesCache.get("", func() ([]*golden.Case, error) {
		dirs, err := caseDirs()
		if err != nil {
			return nil, err
		}
		var out []*golden.Case
		seen := map[string]string{}
		for _, d := range dirs {
			c, err := golden.Load(d)
			if err != nil {
				return nil, err
			}
			if prev, ok := seen[c.Manifest.Name]; ok {
				return nil, fmt.Errorf("case name %q in both %s and %s", c.Manifest.Name, prev, d)
			}
			seen[c.Manifest.Name] = d
			out = append(out, c)
		}
		return out, nil
	})
	if err != nil {
		t.Fatalf("golden cases: %v", err)
	}
	return cs
}

// sharedBackend is the CPU backend of the whole binary (closed by TestMain).
var sharedBackend backend.Backend

// cpuE returns the shared CPU backend (one thread pool for the whole binary).
func cpuE() (backend.Backend, error) {
	return backendCache.get("", func() (backend.Backend, error) {
		be, _, _, err := loader.NewBackend(loader.BackendCPU, 0)
		if err != nil {
			return nil, fmt.Errorf("cpu backend: %w", err)
		}
		sharedBackend = be
		return be, nil
	})
}

type artifactInfo struct {
	path      string
	fallbacks []string // "object: reason" of recipe fallbacks
}

// artifact converts case c with the named preset (once per binary).
func artifact(t *testing.T, c *golden.Case, preset string) artifactInfo {
	t.Helper()
	a, err := artifactE(c, preset)
	if err != nil {
		t.Fatalf("case %s: %v", c.Manifest.Name, err)
	}
	return a
}

func artifactE(c *golden.Case, preset string) (artifactInfo, error) {
	return artifactsCache.get(c.Manifest.Name+"/"+preset, func() (artifactInfo, error) {
		r, err := recipe.Lookup(preset)
		if err != nil {
			return artifactInfo{}, err
		}
		dst := filepath.Join(tmpRoot, c.Manifest.Name+"."+preset+".ninfer")
		res, err := convert.Convert(context.Background(), c.HFDir, dst, convert.Options{Recipe: r, Workers: 1})
		if err != nil {
			return artifactInfo{}, fmt.Errorf("convert %s with %s: %w", c.HFDir, preset, err)
		}
		a := artifactInfo{path: dst}
		for _, fb := range res.Fallbacks {
			a.fallbacks = append(a.fallbacks, fmt.Sprintf("%s→%s (%s)", fb.Tensor.Name, fb.Format, fb.Reason))
		}
		return a, nil
	})
}

// model is an engine over one converted artifact.
type model struct {
	w   *loader.Weights
	ew  engine.Weights // what the engine was built on (w, or a view of it): give it to LoadMTP
	eng *engine.Engine
	seq *engine.Sequence
}

func (m *model) close() {
	if m.seq != nil {
		m.seq.Close()
	}
	if m.eng != nil {
		m.eng.Close()
	}
	if m.w != nil {
		m.w.Close()
	}
}

// variant selects the engine input: the artifact as converted, or its
// "represented" weights (every tensor decoded to fp32 with the reference
// decoder of pkg/format), which runs the fp32 kernels on exactly the values
// the quantized artifact stores.
type variant int

const (
	asStored variant = iota
	asDecoded
)

func (v variant) String() string {
	if v == asDecoded {
		return "decoded"
	}
	return "stored"
}

// view turns an opened artifact into the engine's input; nil is the
// artifact as stored.
type view func(*loader.Weights) engine.Weights

// view returns the engine input of a variant.
func (v variant) view() view {
	if v == asDecoded {
		return func(w *loader.Weights) engine.Weights { return decodedWeights{w} }
	}
	return nil
}

// decodedWeights presents every tensor of an artifact as fp32.
type decodedWeights struct{ w *loader.Weights }

func (d decodedWeights) Config() qwen35.Config { return d.w.Config() }

func (d decodedWeights) Tensor(id string) (format.Format, []int64, []byte, error) {
	f, shape, data, err := d.w.Tensor(id)
	if err != nil || f == format.FP32 {
		return f, shape, data, err
	}
	vals, err := format.Decode(f, shape, data)
	if err != nil {
		return "", nil, nil, fmt.Errorf("decode %s (%s): %w", id, f, err)
	}
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return format.FP32, shape, out, nil
}

// open loads the artifact of (c, preset) into a fresh engine with one
// sequence (closed when t ends). A zero o.MaxContext becomes 512.
func open(t *testing.T, c *golden.Case, preset string, o engine.Options, v variant) *model {
	t.Helper()
	m, err := openE(c, preset, o, v)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.close)
	return m
}

func openE(c *golden.Case, preset string, o engine.Options, v variant) (*model, error) {
	be, err := cpuE()
	if err != nil {
		return nil, err
	}
	return openOnE(be, c, preset, o, v)
}

// openOnE opens case c with the named preset on backend be.
func openOnE(be backend.Backend, c *golden.Case, preset string, o engine.Options, v variant) (*model, error) {
	return openViewOnE(be, c, preset, o, v.String(), v.view())
}

// openViewOnE opens case c with the named preset on backend be through
// view vw (named what in errors; nil: as stored).
func openViewOnE(be backend.Backend, c *golden.Case, preset string, o engine.Options, name string, vw view) (*model, error) {
	a, err := artifactE(c, preset)
	if err != nil {
		return nil, err
	}
	if o.MaxContext == 0 {
		o.MaxContext = 512
	}
	what := fmt.Sprintf("case %s preset %s (%s) kv %q chunk %d", c.Manifest.Name, preset, name, o.KVDtype, o.PrefillChunk)
	m := &model{}
	if m.w, err = loader.OpenWeights(a.path); err != nil {
		return nil, fmt.Errorf("%s: open weights: %w", what, err)
	}
	var w engine.Weights = m.w
	if vw != nil {
		w = vw(m.w)
	}
	m.ew = w
	if m.eng, err = engine.New(w, be, o); err != nil {
		m.close()
		return nil, fmt.Errorf("%s: engine: %w", what, err)
	}
	if m.seq, err = m.eng.NewSequence(); err != nil {
		m.close()
		return nil, fmt.Errorf("%s: sequence: %w", what, err)
	}
	return m, nil
}

func i32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out
}

// rows splits a row-major [n·V] block into n rows.
func rows(flat []float32, V int) [][]float32 {
	out := make([][]float32, len(flat)/V)
	for r := range out {
		out[r] = flat[r*V : (r+1)*V]
	}
	return out
}

// traceOf returns the engine's next-token logits over the reference
// sequence IDs ++ Continuation: rows 0..T−1 from one all-logits prefill of
// the prompt (chunk 1024), then rows T..T+30 from teacher-forced decode
// steps of Continuation[0..30]. Row T−1+i is the step that predicts
// Continuation[i].
func traceOf(c *golden.Case, preset, kv string, v variant) ([][]float32, error) {
	return viewTraceOf(c, preset, kv, v.String(), v.view())
}

// viewTraceOf is traceOf through view vw, cached under its name.
func viewTraceOf(c *golden.Case, preset, kv, name string, vw view) ([][]float32, error) {
	key := fmt.Sprintf("%s/%s/%s/%s", c.Manifest.Name, preset, kv, name)
	return traceCache.get(key, func() ([][]float32, error) {
		be, err := cpuE()
		if err != nil {
			return nil, err
		}
		md, err := openViewOnE(be, c, preset, engine.Options{PrefillChunk: 1024, KVDtype: kv, LogitsRows: 64}, name, vw)
		if err != nil {
			return nil, err
		}
		defer md.close()
		V := c.Manifest.VocabSize
		ids, cont := c.Manifest.IDs, c.Manifest.Continuation
		flat, err := md.seq.Prefill(i32(ids), true)
		if err != nil {
			return nil, fmt.Errorf("%s: prefill: %w", key, err)
		}
		out := rows(flat, V)
		if len(out) != len(ids) {
			return nil, fmt.Errorf("%s: prefill returned %d rows for %d ids", key, len(out), len(ids))
		}
		for i := 1; i < len(cont); i++ {
			row, err := md.seq.Decode(int32(cont[i-1]))
			if err != nil {
				return nil, fmt.Errorf("%s: decode step %d: %w", key, i, err)
			}
			out = append(out, append([]float32(nil), row...))
		}
		return out, nil
	})
}

func trace(t *testing.T, c *golden.Case, preset, kv string, v variant) [][]float32 {
	t.Helper()
	tr, err := traceOf(c, preset, kv, v)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// metrics is the accuracy of one case × preset × KV dtype against the
// transformers float32 reference.
type metrics struct {
	Case, Preset, KV string
	Rows             int     // compared rows: stored prompt rows + 31 teacher-forced continuation rows
	MaxAbs           float64 // max |Δlogit| over every compared element (NaN → +Inf)
	MeanAbs          float64 // mean |Δlogit| over every compared element (NaN → +Inf)
	Top1             int     // rows whose argmax equals the reference argmax
	GreedyPrefix     int     // leading greedy tokens equal to the reference continuation (of GreedyLen)
	GreedyLen        int
	WorstAt          string // where MaxAbs occurs
	Fallbacks        []string
}

// Top1Rate is the fraction of compared rows with the reference argmax.
func (m *metrics) Top1Rate() float64 { return float64(m.Top1) / float64(m.Rows) }

// acc accumulates |Δ| statistics over rows.
type acc struct {
	n       int
	sum     float64
	maxAbs  float64
	worstAt string
	rows    int
	top1    int
}

func (a *acc) add(where string, got, want []float32) {
	d, same := golden.Compare(got, want)
	if d > a.maxAbs || (a.rows == 0) {
		a.maxAbs, a.worstAt = d, where
	}
	for i := range want {
		x := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(x) {
			x = math.Inf(1)
		}
		a.sum += x
	}
	a.n += len(want)
	a.rows++
	if same {
		a.top1++
	}
}

func (a *acc) mean() float64 { return a.sum / float64(a.n) }

// addStored adds every row of tr that the case stores a reference row for
// (at), labelled fmt.Sprintf(label, index), and fails t unless that covers
// all stored rows of this kind.
func (a *acc) addStored(t *testing.T, name string, tr [][]float32, at func(int) ([]float32, bool), stored int, label, kind string) {
	t.Helper()
	for i := range tr {
		if want, ok := at(i); ok {
			a.add(fmt.Sprintf(label, i), tr[i], want)
		}
	}
	if a.rows != stored {
		t.Fatalf("%s: compared %d %s rows, the case stores %d", name, a.rows, kind, stored)
	}
}

// fill copies the accumulated statistics into m.
func (a *acc) fill(m *metrics) {
	m.Rows, m.MaxAbs, m.WorstAt, m.MeanAbs, m.Top1 = a.rows, a.maxAbs, a.worstAt, a.mean(), a.top1
}

// measure compares the trace of (c, preset, kv) with the golden data: every
// stored prompt row and the 31 teacher-forced continuation rows. Until the
// first disagreement the engine's argmax sequence over the teacher-forced
// rows is exactly its free-running greedy continuation, so GreedyPrefix is
// the greedy agreement length.
func measure(t *testing.T, c *golden.Case, preset, kv string) *metrics {
	t.Helper()
	return measureTrace(t, c, trace(t, c, preset, kv, asStored), preset, kv)
}

// measureTrace is measure of a given trace of case c.
func measureTrace(t *testing.T, c *golden.Case, tr [][]float32, preset, kv string) *metrics {
	t.Helper()
	ids, cont := c.Manifest.IDs, c.Manifest.Continuation
	T := len(ids)
	var a acc
	a.addStored(t, c.Manifest.Name, tr[:T], c.LogitsAt, len(c.Logits), "prompt position %d", "prompt")
	m := &metrics{Case: c.Manifest.Name, Preset: preset, KV: kv, GreedyLen: len(cont),
		Fallbacks: artifact(t, c, preset).fallbacks}
	greedy := true
	for i := range cont {
		row := tr[T-1+i]
		if i > 0 {
			a.add(fmt.Sprintf("continuation step %d", i), row, c.ContinuationLogits[i])
		}
		if greedy && golden.Argmax(row) == cont[i] {
			m.GreedyPrefix++
		} else {
			greedy = false
		}
	}
	a.fill(m)
	return m
}

// mtpTraceOf returns the MTP draft head's logits over the prompt (prefill
// in chunks of chunk tokens): row t (t = 0..T−2) combines embed(IDs[t+1])
// with the target's final-normed hidden state at t, the golden MTP row
// convention.
func mtpTraceOf(c *golden.Case, preset, kv string, chunk int) ([][]float32, error) {
	return mtpViewTraceOf(c, preset, kv, chunk, asStored.String(), nil)
}

// mtpViewTraceOf is mtpTraceOf through view vw, cached under its name.
func mtpViewTraceOf(c *golden.Case, preset, kv string, chunk int, name string, vw view) ([][]float32, error) {
	key := fmt.Sprintf("mtp/%s/%s/%s/%d/%s", c.Manifest.Name, preset, kv, chunk, name)
	return traceCache.get(key, func() ([][]float32, error) {
		be, err := cpuE()
		if err != nil {
			return nil, err
		}
		md, err := openViewOnE(be, c, preset, engine.Options{MaxContext: 512, PrefillChunk: chunk, KVDtype: kv, LogitsRows: 64}, name, vw)
		if err != nil {
			return nil, err
		}
		defer md.close()
		m, err := md.eng.LoadMTP(md.ew, engine.MTPOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		defer m.Close()
		ms, err := m.NewMTPSequence()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		defer ms.Close()
		ms.Logits = true
		ids := c.Manifest.IDs
		if _, err := ms.Prefill(i32(ids)); err != nil {
			return nil, fmt.Errorf("%s: prefill: %w", key, err)
		}
		V := c.Manifest.VocabSize
		if len(ms.RowLogits) != (len(ids)-1)*V {
			return nil, fmt.Errorf("%s: MTP returned %d logits, want %d (T−1 rows)", key, len(ms.RowLogits), (len(ids)-1)*V)
		}
		return rows(slices.Clone(ms.RowLogits), V), nil
	})
}

func mtpTrace(t *testing.T, c *golden.Case, preset, kv string, chunk int) [][]float32 {
	t.Helper()
	tr, err := mtpTraceOf(c, preset, kv, chunk)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// measureMTP compares the MTP trace (chunk 128: the rows cross a prefill
// chunk boundary) with every stored golden MTP row.
func measureMTP(t *testing.T, c *golden.Case, preset, kv string) *metrics {
	t.Helper()
	return measureMTPTrace(t, c, mtpTrace(t, c, preset, kv, 128), preset, kv)
}

// measureMTPTrace is measureMTP of a given MTP trace of case c.
func measureMTPTrace(t *testing.T, c *golden.Case, tr [][]float32, preset, kv string) *metrics {
	t.Helper()
	var a acc
	a.addStored(t, c.Manifest.Name, tr, c.MTPLogitsAt, len(c.MTPLogits), "MTP row %d", "MTP")
	m := &metrics{Case: c.Manifest.Name, Preset: preset, KV: kv, Fallbacks: artifact(t, c, preset).fallbacks}
	a.fill(m)
	return m
}
