// Package hfdir opens a Hugging Face Qwen3.5 model directory: config.json,
// one model.safetensors or the shards of model.safetensors.index.json, and the
// frontend resources. It validates the checkpoint against the qwen35 tensor
// inventory (every tensor present with the right shape and a BF16/F16/F32
// dtype, no unknown text tensors) and reads tensors as float32 rows straight
// from the memory-mapped shards, never loading the whole checkpoint.
package hfdir

import (
	"encoding/json"
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

// File names inside a model directory.
const (
	ConfigFile      = "config.json"
	SingleFile      = "model.safetensors"
	IndexFile       = "model.safetensors.index.json"
	GenerationFile  = "generation_config.json"
	TokenizerFile   = "tokenizer.json"
	TokenizerConfig = "tokenizer_config.json"
	ChatTemplate    = "chat_template.jinja"
)

// ResourceNames lists the frontend files a model directory may carry, in the
// order the .ninfer resources use.
var ResourceNames = []string{
	TokenizerFile, TokenizerConfig, ChatTemplate, GenerationFile,
	"preprocessor_config.json", "video_preprocessor_config.json",
}

// SupportedDTypes are the checkpoint weight dtypes the converter accepts.
var SupportedDTypes = []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32}

// maxListed bounds how many unknown tensor names an error lists, and
// maxListedBytes their quoted length together (past the first name): each
// name is quoted and cut by termsafe.Quote, but 64 escaped runes can still
// take 640 bytes.
const (
	maxListed      = 5
	maxListedBytes = 320
)

type entry struct {
	file *safetensors.File
	info safetensors.TensorInfo
}

// Dir is an open Hugging Face model directory.
type Dir struct {
	Path   string
	Config qwen35.Config
	Layout qwen35.Layout
	// Defaults lists the config fields config.json left out and the
	// transformers Qwen3_5TextConfig default each took.
	Defaults []qwen35.Default
	// SkippedVisual counts model.visual.* tensors that were ignored.
	SkippedVisual int
	// Ignored lists other checkpoint tensors deliberately not used: mtp.*
	// when the config has no MTP layers, lm_head.weight of a tied model.
	Ignored []string
	// GenerationEOS holds generation_config.json's eos_token_id (nil when
	// absent); Config.EOSTokenIDs holds config.json's.
	GenerationEOS []int
	// Shards lists the safetensors file names in use, sorted.
	Shards []string

	files []*safetensors.File
	index map[string]entry
}

// Open opens and validates the model directory at path. On success the
// caller must Close it.
func Open(path string) (_ *Dir, err error) {
	cfgBytes, err := os.ReadFile(filepath.Join(path, ConfigFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("hfdir: %s: no %s (not a Hugging Face model directory?)", termsafe.Path(path), ConfigFile)
		}
		return nil, pathError(filepath.Join(path, ConfigFile), err)
	}
	cfg, layout, defaults, err := qwen35.ParseHFConfigDefaults(cfgBytes)
	if err != nil {
		return nil, fmt.Errorf("hfdir: %s: %w", termsafe.Path(path), err)
	}
	d := &Dir{Path: path, Config: cfg, Layout: layout, Defaults: defaults, index: map[string]entry{}}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if err := d.readGenerationConfig(); err != nil {
		return nil, err
	}
	if err := d.openWeights(); err != nil {
		return nil, err
	}
	if err := d.checkInventory(); err != nil {
		return nil, err
	}
	return d, nil
}

// Close unmaps every shard. Tensor views become invalid.
func (d *Dir) Close() error {
	var errs []error
	for _, f := range d.files {
		errs = append(errs, f.Close())
	}
	d.files, d.index = nil, nil
	return errors.Join(errs...)
}

// EOSTokenIDs returns config.json's eos ids, or generation_config.json's when
// the config has none.
func (d *Dir) EOSTokenIDs() []int {
	if len(d.Config.EOSTokenIDs) > 0 {
		return d.Config.EOSTokenIDs
	}
	return d.GenerationEOS
}

func (d *Dir) readGenerationConfig() error {
	p := filepath.Join(d.Path, GenerationFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return pathError(p, err)
	}
	var gc struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(b, &gc); err != nil {
		return fmt.Errorf("hfdir: %s: %w", termsafe.Path(p), err)
	}
	ids, err := parseIDs(gc.EOS)
	if err != nil {
		return fmt.Errorf("hfdir: %s: eos_token_id: %w", termsafe.Path(p), err)
	}
	d.GenerationEOS = ids
	return nil
}

func parseIDs(raw json.RawMessage) ([]int, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want an integer or an array of integers, got %s", termsafe.Quote(s))
	}
	return many, nil
}

// openWeights maps the single file or the shards named by the index.
func (d *Dir) openWeights() error {
	idxPath := filepath.Join(d.Path, IndexFile)
	idxBytes, err := os.ReadFile(idxPath)
	switch {
	case err == nil:
		return d.openSharded(idxPath, idxBytes)
	case !errors.Is(err, fs.ErrNotExist):
		return pathError(idxPath, err)
	}
	single := filepath.Join(d.Path, SingleFile)
	if _, err := os.Stat(single); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hfdir: %s: neither %s nor %s exists", termsafe.Path(d.Path), SingleFile, IndexFile)
		}
		return pathError(single, err)
	}
	f, err := safetensors.Open(single)
	if err != nil {
		return fmt.Errorf("hfdir: %w", err)
	}
	d.files = append(d.files, f)
	d.Shards = []string{SingleFile}
	for _, t := range f.Tensors() {
		d.index[t.Name] = entry{file: f, info: t}
	}
	return nil
}

func (d *Dir) openSharded(idxPath string, idxBytes []byte) error {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(idxBytes, &idx); err != nil {
		return fmt.Errorf("hfdir: %s: unparseable index: %w", termsafe.Path(idxPath), err)
	}
	if len(idx.WeightMap) == 0 {
		return fmt.Errorf("hfdir: %s: unparseable index: weight_map is missing or empty", termsafe.Path(idxPath))
	}
	shardSet := map[string]bool{}
	for name, shard := range idx.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return fmt.Errorf("hfdir: %s: tensor %s maps to invalid shard file name %s", termsafe.Path(idxPath), termsafe.Quote(name), termsafe.Quote(shard))
		}
		shardSet[shard] = true
	}
	for s := range shardSet {
		d.Shards = append(d.Shards, s)
	}
	sort.Strings(d.Shards)
	owner := map[string]string{}
	for _, s := range d.Shards {
		p := filepath.Join(d.Path, s)
		if _, err := os.Stat(p); err != nil {
			// The path error would repeat the index's shard name raw.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("hfdir: %s: shard %s listed in %s is missing", termsafe.Path(d.Path), termsafe.Quote(s), IndexFile)
			}
			return fmt.Errorf("hfdir: %s: shard %s listed in %s: %w", termsafe.Path(d.Path), termsafe.Quote(s), IndexFile, err)
		}
		f, err := safetensors.Open(p)
		if err != nil {
			return fmt.Errorf("hfdir: %w", err)
		}
		d.files = append(d.files, f)
		for _, t := range f.Tensors() {
			if prev, dup := owner[t.Name]; dup {
				return fmt.Errorf("hfdir: %s: tensor %s is in both %s and %s", termsafe.Path(d.Path), termsafe.Quote(t.Name), termsafe.Quote(prev), termsafe.Quote(s))
			}
			owner[t.Name] = s
			d.index[t.Name] = entry{file: f, info: t}
		}
	}
	names := make([]string, 0, len(idx.WeightMap))
	for n := range idx.WeightMap {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if got := owner[n]; got != idx.WeightMap[n] {
			if got == "" {
				return fmt.Errorf("hfdir: %s: tensor %s listed in %s is not in shard %s", termsafe.Path(d.Path), termsafe.Quote(n), IndexFile, termsafe.Quote(idx.WeightMap[n]))
			}
			return fmt.Errorf("hfdir: %s: tensor %s is in shard %s, %s says %s", termsafe.Path(d.Path), termsafe.Quote(n), termsafe.Quote(got), IndexFile, termsafe.Quote(idx.WeightMap[n]))
		}
	}
	return nil
}

// checkInventory checks every inventory tensor and rejects unknown ones.
func (d *Dir) checkInventory() error {
	expected := map[string]bool{}
	for _, spec := range d.Config.Tensors() {
		expected[qwen35.HFNameFor(spec.HFName, d.Layout)] = true
		if _, err := d.Tensor(spec); err != nil {
			return err
		}
	}
	var unknown []string
	names := make([]string, 0, len(d.index))
	for n := range d.index {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch {
		case expected[n]:
		case qwen35.IgnoredHFName(n):
			d.SkippedVisual++
		case strings.HasPrefix(n, "mtp.") && d.Config.MTPNumHiddenLayers == 0:
			d.Ignored = append(d.Ignored, n)
		case n == "lm_head.weight" && d.Config.TieWordEmbeddings:
			d.Ignored = append(d.Ignored, n)
		default:
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		var list []string
		size := 0
		for _, n := range unknown {
			q := termsafe.Quote(n)
			if len(list) == maxListed || len(list) > 0 && size+len(q) > maxListedBytes {
				break
			}
			list, size = append(list, q), size+len(q)+2
		}
		more := ""
		if k := len(unknown) - len(list); k > 0 {
			more = fmt.Sprintf(" and %d more", k)
		}
		return fmt.Errorf("hfdir: %s: %d unknown checkpoint tensors (unsupported architecture variant?): %s%s",
			termsafe.Path(d.Path), len(unknown), strings.Join(list, ", "), more)
	}
	return nil
}

// Has reports whether the checkpoint holds a tensor of that (checkpoint) name.
func (d *Dir) Has(hfName string) bool { _, ok := d.index[hfName]; return ok }

// Tensor finds the checkpoint tensor for spec (under the layout's name) and
// checks its dtype and shape.
func (d *Dir) Tensor(spec qwen35.Tensor) (*Tensor, error) {
	hf := qwen35.HFNameFor(spec.HFName, d.Layout)
	e, ok := d.index[hf]
	if !ok {
		return nil, fmt.Errorf("hfdir: %s: tensor %s (checkpoint name %s) is missing", termsafe.Path(d.Path), spec.Name, hf)
	}
	file := filepath.Base(e.file.Path())
	shown := termsafe.Path(file) // a shard name from the index
	if !supported(e.info.DType) {
		return nil, fmt.Errorf("hfdir: %s: tensor %s has unsupported dtype %s (want BF16, F16 or F32)", shown, hf, e.info.DType)
	}
	if !equalShape(e.info.Shape, spec.HFShape) {
		return nil, fmt.Errorf("hfdir: %s: tensor %s has shape %v, expected %v (for %s)", shown, hf, e.info.Shape, spec.HFShape, spec.Name)
	}
	rows, cols := rowsCols(spec.Shape)
	if rows*cols != safetensors.NumElements(e.info.Shape) {
		return nil, fmt.Errorf("hfdir: %s: tensor %s: ninfer shape %v and checkpoint shape %v differ in size", shown, hf, spec.Shape, e.info.Shape)
	}
	return &Tensor{Spec: spec, HFName: hf, File: file, DType: e.info.DType, HFShape: e.info.Shape,
		rows: rows, cols: cols, data: e.file.Data(hf)}, nil
}

func supported(dt safetensors.DType) bool {
	for _, s := range SupportedDTypes {
		if s == dt {
			return true
		}
	}
	return false
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rowsCols views a ninfer shape as a matrix: rank 0/1 is one row, higher
// ranks are [shape[0], prod(shape[1:])].
func rowsCols(shape []int64) (int64, int64) {
	switch len(shape) {
	case 0:
		return 1, 1
	case 1:
		return 1, shape[0]
	}
	return shape[0], safetensors.NumElements(shape[1:])
}

// Resources returns the names from ResourceNames that exist in the directory.
func (d *Dir) Resources() []string {
	var out []string
	for _, n := range ResourceNames {
		if st, err := os.Stat(filepath.Join(d.Path, n)); err == nil && st.Mode().IsRegular() {
			out = append(out, n)
		}
	}
	return out
}

// Resource returns the raw bytes of a frontend file of the directory.
func (d *Dir) Resource(name string) ([]byte, error) {
	known := false
	for _, n := range ResourceNames {
		known = known || n == name
	}
	if !known {
		return nil, fmt.Errorf("hfdir: %s is not a known resource file (want one of %s)", termsafe.Quote(name), strings.Join(ResourceNames, ", "))
	}
	b, err := os.ReadFile(filepath.Join(d.Path, name))
	if err != nil {
		return nil, pathError(filepath.Join(d.Path, name), err)
	}
	return b, nil
}

// pathError is err about the file at path, path shown through
// termsafe.Path: the *fs.PathError of the os package would repeat the path
// raw (a directory name with control bytes, or thousands of bytes long).
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("hfdir: %s: %w", termsafe.Path(path), err)
}
