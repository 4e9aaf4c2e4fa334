// Package golden reads the Hugging Face transformers reference data under
// testdata/golden: tiny random Qwen3.5 checkpoints (config.json +
// model.safetensors, float32, with mtp.* tensors) and, for a fixed token id
// sequence, the reference logits, a 32-token greedy continuation with its
// per-step logits, and the MTP draft-head logits. The data is produced by
// scripts/golden/make_golden.py; see scripts/golden/README.md.
//
// Row convention of every logits block: row r is sequence position
// p = FirstPosition + r and holds the next-token logits after seq[0..p]
// (seq = IDs for Logits and MTPLogits, IDs ++ Continuation for
// ContinuationLogits). MTP row r is t = FirstPosition + r: the draft head
// combines embed(IDs[t+1]) with the main model's final-normed hidden state at
// t, runs its full-attention layer at RoPE position t (causal over MTP rows
// 0..t), and predicts IDs[t+2].
package golden

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/ninfer/ninfer/pkg/termsafe"
)

// ManifestName is the manifest file name inside a case directory.
const ManifestName = "golden.json"

// FormatVersion is the manifest format version this reader understands.
const FormatVersion = 1

// Block describes one raw little-endian float32 logits file [Rows, Vocab].
type Block struct {
	File          string  `json:"file"`
	DType         string  `json:"dtype"`
	FirstPosition int     `json:"first_position"`
	Rows          int     `json:"rows"`
	Vocab         int     `json:"vocab"`
	SHA256        string  `json:"sha256"`
	MaxAbs        float64 `json:"max_abs"`
	Mean          float64 `json:"mean"`
	Std           float64 `json:"std"`
}

// HiddenBlock describes hidden.f32: float32 [len(Names), len(Positions),
// HiddenSize] debugging snapshots of the residual stream. Names are
// "embedding", "layer.<i>" (after decoder layer i), "final_norm" (lm_head
// input), and for the MTP head "mtp.fc" (fc output), "mtp.layer" (after its
// decoder layer) and "mtp.norm" (lm_head input); positions are p for the main
// model and t for the MTP rows.
type HiddenBlock struct {
	File       string   `json:"file"`
	DType      string   `json:"dtype"`
	Names      []string `json:"names"`
	Positions  []int    `json:"positions"`
	HiddenSize int      `json:"hidden_size"`
	SHA256     string   `json:"sha256"`
	MaxAbs     float64  `json:"max_abs"`
}

// Checks are the self-checks make_golden.py ran when it produced a case.
type Checks struct {
	GreedyMinTop2Margin           float64 `json:"greedy_min_top2_margin"`
	CachedDecodeVsRecomputeMaxAbs float64 `json:"cached_decode_vs_recompute_max_abs"`
	GenerateEqualsRecompute       bool    `json:"generate_equals_recompute"`
	// Differences between the HF float32 data and the independent float64
	// implementation of shared/reference/qwen35.md in scripts/golden/ref_f64.py.
	Float64LogitsMaxAbs             float64 `json:"float64_formula_logits_max_abs"`
	Float64HiddenMaxAbs             float64 `json:"float64_formula_hidden_max_abs"`
	Float64ContinuationLogitsMaxAbs float64 `json:"float64_formula_continuation_logits_max_abs"`
	Float64MTPLogitsMaxAbs          float64 `json:"float64_formula_mtp_logits_max_abs"`
	Float64GreedyEqual              bool    `json:"float64_formula_greedy_equal"`
	ReloadedHFDirMaxAbs             float64 `json:"reloaded_hf_dir_max_abs"`
}

// Manifest is the content of golden.json.
type Manifest struct {
	FormatVersion      int               `json:"format_version"`
	Name               string            `json:"name"`
	Description        string            `json:"description"`
	Command            string            `json:"command"`
	Versions           map[string]string `json:"versions"`
	ModelSeed          int64             `json:"model_seed"`
	IDsSeed            int64             `json:"ids_seed"`
	HFDir              string            `json:"hf_dir"` // relative to the case directory
	Architecture       string            `json:"architecture"`
	VocabSize          int               `json:"vocab_size"`
	NumHiddenLayers    int               `json:"num_hidden_layers"`
	LayerTypes         []string          `json:"layer_types"`
	TieWordEmbeddings  bool              `json:"tie_word_embeddings"`
	IDs                []int             `json:"ids"`
	Continuation       []int             `json:"continuation"`
	Logits             Block             `json:"logits"`
	ContinuationLogits Block             `json:"continuation_logits"`
	MTPLogits          Block             `json:"mtp_logits"`
	Hidden             *HiddenBlock      `json:"hidden,omitempty"`
	Conventions        map[string]string `json:"conventions"`
	Checks             Checks            `json:"checks"`
}

// Case is one loaded golden case.
type Case struct {
	Dir      string // case directory
	HFDir    string // Hugging Face checkpoint directory (config.json, model.safetensors)
	Manifest Manifest

	// Logits[r] is position Manifest.Logits.FirstPosition + r of IDs.
	Logits [][]float32
	// ContinuationLogits[i] is the greedy step that produced Continuation[i].
	ContinuationLogits [][]float32
	// MTPLogits[r] is MTP position t = Manifest.MTPLogits.FirstPosition + r.
	MTPLogits [][]float32
	// Hidden[name][k] is the snapshot at Manifest.Hidden.Positions[k]; nil
	// when the case has no hidden block.
	Hidden map[string][][]float32
}

// HiddenAt returns the hidden snapshot name (e.g. "layer.2") at position pos.
func (c *Case) HiddenAt(name string, pos int) ([]float32, bool) {
	rows, ok := c.Hidden[name]
	if !ok || c.Manifest.Hidden == nil {
		return nil, false
	}
	for k, p := range c.Manifest.Hidden.Positions {
		if p == pos {
			return rows[k], true
		}
	}
	return nil, false
}

// LogitsAt returns the reference logits at sequence position pos of IDs.
func (c *Case) LogitsAt(pos int) ([]float32, bool) {
	return rowAt(c.Logits, c.Manifest.Logits.FirstPosition, pos)
}

// MTPLogitsAt returns the reference MTP logits at MTP position t.
func (c *Case) MTPLogitsAt(t int) ([]float32, bool) {
	return rowAt(c.MTPLogits, c.Manifest.MTPLogits.FirstPosition, t)
}

func rowAt(rows [][]float32, first, pos int) ([]float32, bool) {
	r := pos - first
	if r < 0 || r >= len(rows) {
		return nil, false
	}
	return rows[r], true
}

// Load reads the case in dir: the manifest and all three logits blocks, and
// validates shapes, sizes and values (finite) against the manifest.
func Load(dir string) (*Case, error) {
	mpath := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(mpath)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", mpath, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", mpath, err)
	}
	c := &Case{Dir: dir, HFDir: filepath.Join(dir, m.HFDir), Manifest: m}
	for _, f := range []string{"config.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(c.HFDir, f)); err != nil {
			return nil, fmt.Errorf("golden: case %s: hf dir: %w", m.Name, err)
		}
	}
	blocks := []struct {
		b   Block
		dst *[][]float32
	}{{m.Logits, &c.Logits}, {m.ContinuationLogits, &c.ContinuationLogits}, {m.MTPLogits, &c.MTPLogits}}
	for _, bl := range blocks {
		rows, err := readBlock(dir, bl.b)
		if err != nil {
			return nil, fmt.Errorf("golden: case %s: %w", m.Name, err)
		}
		*bl.dst = rows
	}
	if h := m.Hidden; h != nil {
		flat, err := readBlock(dir, Block{File: h.File, DType: h.DType, Rows: len(h.Names) * len(h.Positions),
			Vocab: h.HiddenSize, SHA256: h.SHA256})
		if err != nil {
			return nil, fmt.Errorf("golden: case %s: hidden: %w", m.Name, err)
		}
		c.Hidden = make(map[string][][]float32, len(h.Names))
		for i, name := range h.Names {
			c.Hidden[name] = flat[i*len(h.Positions) : (i+1)*len(h.Positions)]
		}
	}
	return c, nil
}

func (m Manifest) validate() error {
	if m.FormatVersion != FormatVersion {
		return fmt.Errorf("format_version %d, this reader understands %d", m.FormatVersion, FormatVersion)
	}
	if m.Name == "" || m.VocabSize <= 0 {
		return errors.New("name and vocab_size are required")
	}
	T := len(m.IDs)
	if T < 2 {
		return fmt.Errorf("ids has %d entries, want at least 2", T)
	}
	if len(m.Continuation) == 0 {
		return errors.New("continuation is empty")
	}
	for i, id := range append(append([]int(nil), m.IDs...), m.Continuation...) {
		if id < 0 || id >= m.VocabSize {
			return fmt.Errorf("token %d at index %d is outside vocab_size %d", id, i, m.VocabSize)
		}
	}
	if len(m.LayerTypes) != m.NumHiddenLayers {
		return fmt.Errorf("layer_types has %d entries, num_hidden_layers is %d", len(m.LayerTypes), m.NumHiddenLayers)
	}
	check := func(name string, b Block, seqLen int) error {
		switch {
		case b.File == "" || filepath.Base(b.File) != b.File:
			return fmt.Errorf("%s: file %s must be a plain file name", name, termsafe.Quote(b.File))
		case b.DType != "float32":
			return fmt.Errorf("%s: dtype %s, want float32", name, termsafe.Quote(b.DType))
		case b.Vocab != m.VocabSize:
			return fmt.Errorf("%s: vocab %d, manifest vocab_size %d", name, b.Vocab, m.VocabSize)
		case b.Rows <= 0 || b.FirstPosition < 0 || b.FirstPosition+b.Rows > seqLen:
			return fmt.Errorf("%s: rows [%d, %d) outside the %d valid positions", name, b.FirstPosition, b.FirstPosition+b.Rows, seqLen)
		}
		return nil
	}
	if err := check("logits", m.Logits, T); err != nil {
		return err
	}
	if err := check("mtp_logits", m.MTPLogits, T-1); err != nil {
		return err
	}
	cl := m.ContinuationLogits
	if err := check("continuation_logits", cl, T+len(m.Continuation)); err != nil {
		return err
	}
	if cl.FirstPosition != T-1 || cl.Rows != len(m.Continuation) {
		return fmt.Errorf("continuation_logits: rows [%d, %d), want [%d, %d) (one per continuation token)",
			cl.FirstPosition, cl.FirstPosition+cl.Rows, T-1, T-1+len(m.Continuation))
	}
	if h := m.Hidden; h != nil {
		if h.File == "" || filepath.Base(h.File) != h.File || h.DType != "float32" || h.HiddenSize <= 0 ||
			len(h.Names) == 0 || len(h.Positions) == 0 {
			return fmt.Errorf("hidden: needs a plain file name, dtype float32, hidden_size, names and positions")
		}
		seen := map[string]bool{}
		for _, n := range h.Names {
			if seen[n] {
				return fmt.Errorf("hidden: name %s repeated", termsafe.Quote(n))
			}
			seen[n] = true
		}
		for _, p := range h.Positions {
			if p < 0 || p >= T-1 {
				return fmt.Errorf("hidden: position %d outside [0, %d) (valid for the main model and MTP)", p, T-1)
			}
		}
	}
	return nil
}

func readBlock(dir string, b Block) ([][]float32, error) {
	path := filepath.Join(dir, b.File)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if want := b.Rows * b.Vocab * 4; len(raw) != want {
		return nil, fmt.Errorf("%s: %d bytes, manifest shape [%d, %d] float32 needs %d", path, len(raw), b.Rows, b.Vocab, want)
	}
	if sum := sha256.Sum256(raw); b.SHA256 != "" && hex.EncodeToString(sum[:]) != b.SHA256 {
		return nil, fmt.Errorf("%s: sha256 %x does not match the manifest %s", path, sum, b.SHA256)
	}
	rows := make([][]float32, b.Rows)
	flat := make([]float32, b.Rows*b.Vocab)
	for i := range flat {
		v := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%s: non-finite value %v at row %d column %d", path, v, i/b.Vocab, i%b.Vocab)
		}
		flat[i] = v
	}
	for r := range rows {
		rows[r] = flat[r*b.Vocab : (r+1)*b.Vocab : (r+1)*b.Vocab]
	}
	return rows, nil
}

// Cases lists the case directories under root (those holding a golden.json),
// sorted by name.
func Cases(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(root, e.Name())
		if _, err := os.Stat(filepath.Join(d, ManifestName)); err == nil {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Root returns testdata/golden of the enclosing Go module, found by walking
// up from the working directory to go.mod (tests run in their package dir).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("golden: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "golden"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("golden: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Compare returns the largest |got[i] − want[i]| (NaN in got gives +Inf) and
// whether the two rows have the same argmax.
func Compare(got, want []float32) (maxAbs float64, sameArgmax bool) {
	if len(got) != len(want) {
		return math.Inf(1), false
	}
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		maxAbs = math.Max(maxAbs, d)
	}
	return maxAbs, Argmax(got) == Argmax(want)
}

// Argmax returns the index of the largest value (first on ties; NaN never wins).
func Argmax(row []float32) int {
	best := -1
	for i, v := range row {
		if math.IsNaN(float64(v)) {
			continue
		}
		if best < 0 || v > row[best] {
			best = i
		}
	}
	return best
}
