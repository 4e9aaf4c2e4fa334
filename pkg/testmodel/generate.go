package testmodel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/safetensors"
	"github.com/ninfer/ninfer/pkg/termsafe"
)

// Manifest summarizes a generated directory.
type Manifest struct {
	Files         []string // file names written, in write order
	Tensors       int      // checkpoint tensors (vision dummies included)
	WeightBytes   int64    // total tensor bytes
	TokenizerSize int      // BPE vocabulary + added tokens
	Merges        int
	EOS           int // config.json eos_token_id (<|endoftext|>)
	Tokenizer     *Tokenizer
}

// Generate writes a complete model directory into dir, which must exist.
// Output bytes depend only on opt.
func Generate(dir string, opt Options) (*Manifest, error) {
	return GenerateContext(context.Background(), dir, opt)
}

// GenerateContext is Generate, stopping with ctx's error (the files written
// so far stay in dir: WriteDirContext removes its temporary directory).
func GenerateContext(ctx context.Context, dir string, opt Options) (*Manifest, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dt, _, _ := opt.dtype()
	merges := min(opt.MaxMerges, opt.Vocab-256-len(SpecialTokens))
	tok, err := TrainTokenizer(Corpus, merges)
	if err != nil {
		return nil, fmt.Errorf("testmodel: tokenizer: %w", err)
	}
	if tok.Size() > opt.Vocab {
		return nil, fmt.Errorf("testmodel: tokenizer has %d tokens, vocab is %d", tok.Size(), opt.Vocab)
	}
	m := &Manifest{TokenizerSize: tok.Size(), Merges: len(tok.Merges), EOS: tok.ID(TokEndOfText), Tokenizer: tok}
	write := func(name string, data []byte) error {
		if err := writeFileAtomic(filepath.Join(dir, name), data); err != nil {
			return fmt.Errorf("testmodel: %w", err)
		}
		m.Files = append(m.Files, name)
		return nil
	}

	cfgJSON, err := opt.ConfigJSON(m.EOS)
	if err != nil {
		return nil, err
	}
	// Self-check: the config we write must parse back to what we describe.
	if _, _, err := qwen35.ParseHFConfig(cfgJSON); err != nil {
		return nil, fmt.Errorf("testmodel: generated config.json does not parse: %w", err)
	}
	if err := write("config.json", cfgJSON); err != nil {
		return nil, err
	}

	var named []safetensors.NamedTensor
	for _, w := range opt.weights() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := safetensors.EncodeF32(dt, w.values, nil)
		if err != nil {
			return nil, fmt.Errorf("testmodel: %s: %w", w.hfName, err)
		}
		named = append(named, safetensors.NamedTensor{Name: w.hfName, DType: dt, Shape: w.shape, Data: data})
		m.WeightBytes += int64(len(data))
	}
	m.Tensors = len(named)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := writeWeights(dir, named, opt.Shards, m); err != nil {
		return nil, err
	}

	tj, err := tok.TokenizerJSON()
	if err != nil {
		return nil, fmt.Errorf("testmodel: tokenizer.json: %w", err)
	}
	tc, err := tok.TokenizerConfigJSON(opt.MaxPositionEmbeddings)
	if err != nil {
		return nil, fmt.Errorf("testmodel: tokenizer_config.json: %w", err)
	}
	gc, err := generationConfig(tok)
	if err != nil {
		return nil, fmt.Errorf("testmodel: generation_config.json: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"tokenizer.json", tj}, {"tokenizer_config.json", tc}, {"generation_config.json", gc}, {"chat_template.jinja", []byte(ChatTemplateText)}} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := write(f.name, f.data); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var stMetadata = map[string]string{"format": "pt"}

// writeWeights writes model.safetensors, or n shards plus the index.
func writeWeights(dir string, named []safetensors.NamedTensor, n int, m *Manifest) error {
	if n == 1 {
		if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), named, stMetadata); err != nil {
			return fmt.Errorf("testmodel: %w", err)
		}
		m.Files = append(m.Files, "model.safetensors")
		return nil
	}
	shards := splitShards(named, n)
	weightMap := orderedObject{}
	byName := map[string]string{}
	for i, s := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		if err := safetensors.Write(filepath.Join(dir, name), s, stMetadata); err != nil {
			return fmt.Errorf("testmodel: %w", err)
		}
		m.Files = append(m.Files, name)
		for _, t := range s {
			byName[t.Name] = name
		}
	}
	keys := make([]string, 0, len(byName))
	for k := range byName {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		weightMap = append(weightMap, kv{k, byName[k]})
	}
	idx, err := indentJSON(orderedObject{
		{"metadata", orderedObject{{"total_size", m.WeightBytes}}},
		{"weight_map", weightMap},
	})
	if err != nil {
		return fmt.Errorf("testmodel: index: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, "model.safetensors.index.json"), idx); err != nil {
		return fmt.Errorf("testmodel: %w", err)
	}
	m.Files = append(m.Files, "model.safetensors.index.json")
	return nil
}

// splitShards cuts tensors (in order) into n non-empty groups of roughly
// equal byte size. n ≤ len(ts).
func splitShards(ts []safetensors.NamedTensor, n int) [][]safetensors.NamedTensor {
	var total int64
	for _, t := range ts {
		total += int64(len(t.Data))
	}
	target := total / int64(n)
	shards := [][]safetensors.NamedTensor{nil}
	var cur int64
	for i, t := range ts {
		last := len(shards) - 1
		remT, remS := len(ts)-i, n-len(shards)
		if len(shards[last]) > 0 && remS > 0 && (cur >= target || remT <= remS) {
			shards = append(shards, nil)
			last++
			cur = 0
		}
		shards[last] = append(shards[last], t)
		cur += int64(len(t.Data))
	}
	return shards
}

// writeFileAtomic writes data to a temp file next to path and renames it.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// The errors of CheckOutDir (and so of WriteDir) for an output directory
// it will not write: ErrNotEmpty is a non-empty one without force (which
// --force would replace); the others are paths --force cannot fix.
var (
	ErrNotEmpty    = errors.New("output directory is not empty")
	ErrNotModelDir = errors.New("is a non-empty directory that is not a model directory (no config.json and weights); --force replaces only a model directory")
	ErrHoldsCwd    = errors.New("is the current directory or one that contains it (give a new directory path)")
	ErrNotDir      = errors.New("exists and is not a directory (want OUT_DIR, a directory path)")
)

// CheckOutDir checks out as the output of WriteDir before any work is
// done, so that a bad path fails at once and not after the generation: it
// must not be the current directory or one of its ancestors (the output
// replaces the directory by a rename), nor a non-directory; an existing
// non-empty directory needs force (ErrNotEmpty) and, with force, must be a
// model directory (config.json and model.safetensors or its index; a
// previous output), so that --force never deletes other files. The
// errors wrap the Err values above and name out through termsafe.Path.
func CheckOutDir(out string, force bool) error {
	shown := termsafe.Path(out)
	if holdsCwd(out) {
		return fmt.Errorf("testmodel: %s %w", shown, ErrHoldsCwd)
	}
	fi, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("testmodel: %s: %w", shown, unwrapPath(err))
	case !fi.IsDir():
		return fmt.Errorf("testmodel: %s %w", shown, ErrNotDir)
	}
	ents, err := os.ReadDir(out)
	switch {
	case err != nil:
		return fmt.Errorf("testmodel: %s: %w", shown, unwrapPath(err))
	case len(ents) == 0:
		return nil
	case !force:
		return fmt.Errorf("testmodel: %s: %w (use --force to replace it)", shown, ErrNotEmpty)
	case !isModelDir(out):
		return fmt.Errorf("testmodel: %s %w", shown, ErrNotModelDir)
	}
	return nil
}

// holdsCwd reports whether out is the working directory or an ancestor of
// it (".", "..", "/", its absolute path): replacing it would move the
// directory the process runs in.
func holdsCwd(out string) bool {
	wd, err := os.Getwd()
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return false
	}
	for _, pair := range [][2]string{{wd, abs}, {evalLinks(wd), evalLinks(abs)}} {
		rel, err := filepath.Rel(pair[1], pair[0])
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

func evalLinks(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// isModelDir reports whether dir holds config.json and the weights
// (model.safetensors or model.safetensors.index.json): what WriteDir
// writes.
func isModelDir(dir string) bool {
	regular := func(name string) bool {
		fi, err := os.Stat(filepath.Join(dir, name))
		return err == nil && fi.Mode().IsRegular()
	}
	return regular("config.json") && (regular("model.safetensors") || regular("model.safetensors.index.json"))
}

// unwrapPath drops a *fs.PathError's path, which would repeat it raw.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// WriteDir generates into a temporary sibling directory and renames it to
// out. An existing empty out is replaced; a non-empty one only with force,
// and only when it is a model directory (CheckOutDir).
func WriteDir(out string, opt Options, force bool) (*Manifest, error) {
	return WriteDirContext(context.Background(), out, opt, force)
}

// WriteDirContext is WriteDir, stopping with ctx's error. On any error,
// also a cancellation or a panic, the temporary directory is removed and
// an existing OUT_DIR is unchanged.
func WriteDirContext(ctx context.Context, out string, opt Options, force bool) (m *Manifest, err error) {
	out = filepath.Clean(out)
	if err := CheckOutDir(out, force); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(out)
	exists := statErr == nil
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("testmodel: %s: create parent directory: %w", termsafe.Path(out), unwrapPath(err))
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("testmodel: %s: create temporary directory: %w", termsafe.Path(out), unwrapPath(err))
	}
	done := false
	defer func() {
		if !done { // an error or a panic: leave nothing behind
			os.RemoveAll(tmp)
		}
	}()
	m, err = GenerateContext(ctx, tmp, opt)
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	done = true
	if exists {
		old := tmp + ".old"
		if err := os.Rename(out, old); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("testmodel: replace %s: %w", termsafe.Path(out), unwrapPath(err))
		}
		if err := os.Rename(tmp, out); err != nil {
			os.Rename(old, out)
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("testmodel: replace %s: %w", termsafe.Path(out), unwrapPath(err))
		}
		if err := os.RemoveAll(old); err != nil {
			return nil, fmt.Errorf("testmodel: remove old %s: %w", termsafe.Path(old), unwrapPath(err))
		}
		return m, nil
	}
	if err := os.Rename(tmp, out); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("testmodel: %s: %w", termsafe.Path(out), unwrapPath(err))
	}
	return m, nil
}
