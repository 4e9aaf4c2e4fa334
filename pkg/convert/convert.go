// Package convert turns a Hugging Face Qwen3.5 model directory into a .ninfer
// artifact. It validates the whole checkpoint before writing anything, then
// streams tensor by tensor: each tensor is encoded from the memory-mapped
// checkpoint into one object buffer by several goroutines (disjoint row
// ranges) and written in plan order while the next tensor is encoded. Peak
// memory is two encoded objects (the largest pair) plus one row of float32
// scratch per worker; the checkpoint itself is only mapped, never copied. The output is written atomically.
package convert

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/format"
	"github.com/ninfer/ninfer/pkg/hfdir"
	"github.com/ninfer/ninfer/pkg/progress"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/safetensors"
)

// Version identifies the converter in the artifact metadata.
const Version = "ninfer-convert/1"

// Options control a conversion.
type Options struct {
	Recipe  recipe.Recipe
	Name    string    // model name; default: the source directory's base name
	Workers int       // encoder goroutines; default runtime.NumCPU()
	Log     io.Writer // fallback notes and the summary line; nil = silent
	// Progress receives the progress bar (drawn only on a terminal unless
	// ForceProgress); nil = none.
	Progress      io.Writer
	ForceProgress bool
	// Draft, when non-nil, adds the reduced-vocabulary proposal head.
	Draft *DraftHead
	// NoReplace creates dst exclusively: the conversion fails with an
	// error matching fs.ErrExist when dst exists at commit time.
	NoReplace bool
}

// DraftHead selects the rows of the optimized proposal head.
type DraftHead struct {
	TokenIDs []int32 // global token ids, one per draft-head row
	Source   string  // provenance, e.g. the corpus path
}

// Result summarises a finished conversion.
type Result struct {
	Objects    int
	InputBytes int64 // checkpoint bytes read for the written tensors
	FileBytes  int64
	Fallbacks  []recipe.Assignment
	Seconds    float64
	MaxObject  int64 // largest encoded object: the memory bound's main term
}

type job struct {
	asg recipe.Assignment
	src *hfdir.Tensor // nil for derived objects
	raw []byte        // derived objects: the encoded payload
}

// Convert converts the model directory src into the artifact dst.
func Convert(ctx context.Context, src, dst string, opts Options) (Result, error) {
	start := time.Now()
	if opts.Workers <= 0 {
		opts.Workers = runtime.NumCPU()
	}
	if opts.Recipe.Name == "" {
		return Result{}, fmt.Errorf("convert: no recipe given")
	}
	dir, err := hfdir.Open(src)
	if err != nil {
		return Result{}, err
	}
	defer dir.Close()
	cfg := dir.Config
	if len(cfg.EOSTokenIDs) == 0 {
		cfg.EOSTokenIDs = dir.EOSTokenIDs()
	}
	asg, err := opts.Recipe.Assign(cfg.Tensors())
	if err != nil {
		return Result{}, err
	}
	jobs := make([]job, 0, len(asg)+2)
	var res Result
	for _, a := range asg {
		t, err := dir.Tensor(a.Tensor)
		if err != nil {
			return Result{}, err
		}
		jobs = append(jobs, job{asg: a, src: t})
		if a.FellBack {
			res.Fallbacks = append(res.Fallbacks, a)
		}
	}
	if opts.Draft != nil {
		dj, err := draftJobs(dir, cfg, opts.Recipe, opts.Draft)
		if err != nil {
			return Result{}, err
		}
		for _, j := range dj {
			if j.asg.FellBack {
				res.Fallbacks = append(res.Fallbacks, j.asg)
			}
		}
		jobs = append(jobs, dj...)
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(src))
	}
	if len(dir.Defaults) > 0 {
		logf(opts.Log, "ninfer-convert: note: %s/config.json leaves out %d config fields; using the transformers Qwen3_5TextConfig defaults: %s\n",
			src, len(dir.Defaults), qwen35.FormatDefaults(dir.Defaults))
	}
	meta := artifact.Meta{
		Name:   name,
		Config: cfg,
		Metadata: map[string]any{
			"recipe":                    opts.Recipe.Name,
			"converter":                 Version,
			artifact.MetaConfigDefaults: qwen35.DefaultsMap(dir.Defaults),
			"source": map[string]any{
				"path":           src,
				"layout":         layoutName(dir.Layout),
				"shards":         strings.Join(dir.Shards, ","),
				"skipped_visual": dir.SkippedVisual,
			},
		},
	}
	if opts.Draft != nil {
		meta.ProposalSource = opts.Draft.Source
	}
	plan := artifact.NewPlan(meta)
	resources := dir.Resources()
	resData := make([][]byte, len(resources))
	for i, r := range resources {
		b, err := dir.Resource(r)
		if err != nil {
			return Result{}, err
		}
		if len(b) == 0 {
			continue // empty files cannot be objects; nothing is lost
		}
		resData[i] = b
		if err := plan.AddResource("frontend/"+r, artifact.ComponentFrontend, int64(len(b))); err != nil {
			return Result{}, err
		}
	}
	hasTokenizer := false
	frontend := make(map[string][]byte, len(resources))
	for i, r := range resources {
		hasTokenizer = hasTokenizer || (r == hfdir.TokenizerFile && len(resData[i]) > 0)
		frontend[r] = resData[i]
	}
	if err := checkFrontend(src, frontend); err != nil {
		return Result{}, err
	}
	if !hasTokenizer {
		logf(opts.Log, "ninfer-convert: note: %s has no %s: the artifact runs on token ids only (ninfer-run --ids)\n", src, hfdir.TokenizerFile)
	}
	var total int64
	for _, j := range jobs {
		if err := plan.AddTensor(j.asg.Tensor.Name, j.asg.Tensor.Component, j.asg.Format, j.asg.Tensor.Shape); err != nil {
			return Result{}, err
		}
		if j.src != nil {
			total += int64(len(j.src.Raw()))
		}
		if j.asg.Bytes > res.MaxObject {
			res.MaxObject = j.asg.Bytes
		}
	}
	for _, f := range res.Fallbacks {
		logf(opts.Log, "ninfer-convert: %s %s: %s\n", f.Tensor.Name, artifact.ShapeString(f.Tensor.Shape), f.Reason)
	}

	w, err := artifact.Create(dst, plan)
	if err != nil {
		return Result{}, err
	}
	w.NoReplace = opts.NoReplace
	committed := false
	defer func() {
		if !committed {
			w.Abort()
		}
	}()
	for i, r := range resources {
		if resData[i] == nil {
			continue
		}
		if err := w.WriteObject("frontend/"+r, resData[i]); err != nil {
			return Result{}, err
		}
	}
	var bar *progress.Bar
	if opts.Progress != nil {
		bar = progress.New(opts.Progress, "convert", total, opts.ForceProgress)
	}
	// Encode tensor i+1 while tensor i is written and hashed: an unbuffered
	// hand-off keeps at most two encoded objects alive.
	type encoded struct {
		id   string
		data []byte
	}
	handoff := make(chan encoded)
	writeErr := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var err error
		for e := range handoff {
			if err == nil {
				if err = w.WriteObject(e.id, e.data); err != nil {
					cancel() // stop encoding: nothing more can be written
				}
			}
		}
		writeErr <- err
	}()
	encodeErr := func() error {
		defer close(handoff)
		for _, j := range jobs {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("convert: %w", err)
			}
			data := j.raw
			if j.src != nil {
				var err error
				if data, err = encodeTensor(ctx, j, opts.Workers, bar); err != nil {
					return err
				}
				res.InputBytes += int64(len(j.src.Raw()))
			}
			handoff <- encoded{j.asg.Tensor.Name, data}
		}
		return nil
	}()
	if err := <-writeErr; err != nil {
		return Result{}, err
	}
	if encodeErr != nil {
		return Result{}, encodeErr
	}
	if bar != nil {
		bar.Finish()
	}
	if err := w.Close(); err != nil {
		return Result{}, err
	}
	committed = true
	res.Objects = len(plan.Objects())
	res.FileBytes = plan.PayloadBytes()
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func layoutName(l qwen35.Layout) string {
	if l == qwen35.LayoutMultimodal {
		return "Qwen3_5ForConditionalGeneration"
	}
	return qwen35.Architecture
}

func logf(w io.Writer, f string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, f, a...)
	}
}

// sourceOf maps a checkpoint dtype to the encoder's raw input encoding.
func sourceOf(dt safetensors.DType) (format.Source, error) {
	switch dt {
	case safetensors.BF16:
		return format.SourceBF16, nil
	case safetensors.F16:
		return format.SourceF16, nil
	case safetensors.F32:
		return format.SourceF32, nil
	}
	return 0, fmt.Errorf("unsupported dtype %s", dt)
}

// chunkRows is the row granularity of parallel encoding and progress.
const chunkRows = 64

// encodeTensor encodes one checkpoint tensor into a new object buffer,
// splitting the rows among workers.
func encodeTensor(ctx context.Context, j job, workers int, bar *progress.Bar) ([]byte, error) {
	t, a := j.src, j.asg
	name := a.Tensor.Name
	st, err := sourceOf(t.DType)
	if err != nil {
		return nil, fmt.Errorf("convert: tensor %s (%s): %w", name, t.HFName, err)
	}
	enc, err := format.NewRowEncoder(a.Format, a.Tensor.Shape)
	if err != nil {
		return nil, fmt.Errorf("convert: tensor %s: %w", name, err)
	}
	raw := t.Raw()
	if a.Format == format.NVFP4 {
		amax, err := format.AmaxRaw(st, raw)
		if err != nil {
			return nil, fmt.Errorf("convert: tensor %s (%s): %w", name, t.HFName, err)
		}
		if err := enc.SetAmax(amax); err != nil {
			return nil, fmt.Errorf("convert: tensor %s: %w", name, err)
		}
	}
	rows, cols := enc.Rows(), enc.Cols()
	rowBytes := cols * int64(st.Width())
	dst := make([]byte, enc.Size())
	nChunks := (rows + chunkRows - 1) / chunkRows
	var next int64
	var mu sync.Mutex
	var firstErr error
	var firstRow int64 = -1
	var wg sync.WaitGroup
	for w := 0; w < workers && int64(w) < nChunks; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				c := next
				next++
				stop := firstErr != nil
				mu.Unlock()
				if stop || c >= nChunks || ctx.Err() != nil {
					return
				}
				r0 := c * chunkRows
				r1 := min(r0+chunkRows, rows)
				err := enc.EncodeRowsRaw(dst, r0, r1, st, raw[r0*rowBytes:r1*rowBytes])
				if err != nil {
					mu.Lock()
					if firstErr == nil || r0 < firstRow {
						firstErr, firstRow = err, r0
					}
					mu.Unlock()
					return
				}
				if bar != nil {
					bar.Add((r1 - r0) * rowBytes)
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("convert: tensor %s (%s): %w", name, t.HFName, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	if err := enc.Finish(dst); err != nil {
		return nil, fmt.Errorf("convert: tensor %s: %w", name, err)
	}
	return dst, nil
}

// draftJobs builds the proposal head: the output-head rows (or embedding
// rows when tied) of the selected token ids, and the int32 id map.
func draftJobs(dir *hfdir.Dir, cfg qwen35.Config, r recipe.Recipe, d *DraftHead) ([]job, error) {
	if len(d.TokenIDs) == 0 {
		return nil, fmt.Errorf("convert: draft head: no token ids")
	}
	seen := make(map[int32]bool, len(d.TokenIDs))
	for i, id := range d.TokenIDs {
		if id < 0 || int(id) >= cfg.VocabSize {
			return nil, fmt.Errorf("convert: draft head: token id %d at position %d is outside the vocabulary [0,%d)", id, i, cfg.VocabSize)
		}
		if seen[id] {
			return nil, fmt.Errorf("convert: draft head: token id %d appears twice", id)
		}
		seen[id] = true
	}
	headName := qwen35.NameOutputHead
	if cfg.TieWordEmbeddings {
		headName = qwen35.NameEmbedding
	}
	var head qwen35.Tensor
	for _, t := range cfg.Tensors() {
		if t.Name == headName {
			head = t
		}
	}
	ht, err := dir.Tensor(head)
	if err != nil {
		return nil, err
	}
	rows, hidden := int64(len(d.TokenIDs)), int64(cfg.HiddenSize)
	headT := qwen35.Tensor{Name: qwen35.NameDraftHead, Shape: []int64{rows, hidden}, HFShape: []int64{rows, hidden},
		Class: qwen35.ClassDraftHead, Component: qwen35.ComponentProposal}
	idsT := qwen35.Tensor{Name: qwen35.NameDraftIDs, Shape: []int64{rows}, HFShape: []int64{rows},
		Class: qwen35.ClassDraftIDs, Component: qwen35.ComponentProposal}
	asg, err := r.Assign([]qwen35.Tensor{headT, idsT})
	if err != nil {
		return nil, err
	}
	// Gather the selected rows (in id-map order) as float32, then encode.
	vals := make([]float32, rows*hidden)
	for i, id := range d.TokenIDs {
		if err := ht.ReadRowsF32(int64(id), int64(id)+1, vals[int64(i)*hidden:int64(i+1)*hidden]); err != nil {
			return nil, err
		}
	}
	headBytes, err := format.Encode(asg[0].Format, headT.Shape, vals)
	if err != nil {
		return nil, fmt.Errorf("convert: %s: %w", qwen35.NameDraftHead, err)
	}
	idBytes := make([]byte, 4*rows)
	for i, id := range d.TokenIDs {
		u := uint32(id)
		idBytes[4*i], idBytes[4*i+1], idBytes[4*i+2], idBytes[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return []job{{asg: asg[0], raw: headBytes}, {asg: asg[1], raw: idBytes}}, nil
}

// TopTokens returns the n most frequent ids of corpus (ties: lower id
// first), always including the given special ids, as a sorted-by-rank list.
func TopTokens(corpus []int32, vocab, n int, special []int32) ([]int32, error) {
	if n <= 0 {
		return nil, fmt.Errorf("draft head size must be positive, got %d", n)
	}
	if n > vocab {
		n = vocab
	}
	counts := make([]int64, vocab)
	for i, id := range corpus {
		if id < 0 || int(id) >= vocab {
			return nil, fmt.Errorf("corpus id %d at position %d is outside the vocabulary [0,%d)", id, i, vocab)
		}
		counts[id]++
	}
	order := make([]int32, vocab)
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(a, b int) bool { return counts[order[a]] > counts[order[b]] })
	chosen := make(map[int32]bool, n)
	var out []int32
	for _, s := range special {
		if s >= 0 && int(s) < vocab && !chosen[s] {
			chosen[s] = true
			out = append(out, s)
		}
	}
	if len(out) > n {
		return nil, fmt.Errorf("draft head size %d is smaller than the %d special tokens it must hold", n, len(out))
	}
	for _, id := range order {
		if len(out) == n {
			break
		}
		if !chosen[id] {
			chosen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}
