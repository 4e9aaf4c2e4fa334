package golden

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/qwen35"
)

func committedCases(t *testing.T) []string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := Cases(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("Cases(%s) = %d cases, want at least 3", root, len(dirs))
	}
	return dirs
}

func TestCommittedCasesLoad(t *testing.T) {
	for _, dir := range committedCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			m := c.Manifest
			if m.Name != filepath.Base(dir) {
				t.Errorf("manifest name %q in directory %q", m.Name, dir)
			}
			if len(m.IDs) < 128 || len(m.Continuation) < 32 {
				t.Errorf("len(ids) = %d (want ≥ 128), len(continuation) = %d (want ≥ 32)", len(m.IDs), len(m.Continuation))
			}
			for _, bl := range []struct {
				name string
				b    Block
				rows [][]float32
			}{{"logits", m.Logits, c.Logits}, {"continuation_logits", m.ContinuationLogits, c.ContinuationLogits},
				{"mtp_logits", m.MTPLogits, c.MTPLogits}} {
				if len(bl.rows) != bl.b.Rows {
					t.Fatalf("%s: %d rows, manifest %d", bl.name, len(bl.rows), bl.b.Rows)
				}
				var maxAbs, sum, sq float64
				n := 0
				for r, row := range bl.rows {
					if len(row) != m.VocabSize {
						t.Fatalf("%s row %d: %d columns, vocab %d", bl.name, r, len(row), m.VocabSize)
					}
					for _, v := range row {
						f := float64(v)
						if math.IsNaN(f) || math.IsInf(f, 0) {
							t.Fatalf("%s row %d: non-finite %v", bl.name, r, v)
						}
						maxAbs = math.Max(maxAbs, math.Abs(f))
						sum += f
						sq += f * f
						n++
					}
				}
				std := math.Sqrt(sq/float64(n) - (sum/float64(n))*(sum/float64(n)))
				if math.Abs(maxAbs-bl.b.MaxAbs) > 1e-6*bl.b.MaxAbs {
					t.Errorf("%s: max|v| = %v, manifest %v", bl.name, maxAbs, bl.b.MaxAbs)
				}
				// Non-degenerate: logits spread over several units, not ~0.
				if std < 1 || math.Abs(std-bl.b.Std) > 1e-3*bl.b.Std {
					t.Errorf("%s: std = %v (manifest %v), want ≥ 1 and equal", bl.name, std, bl.b.Std)
				}
			}
			// The greedy continuation is the argmax of its logits rows, with a
			// clear margin, and its first row is the last prompt position.
			for i, row := range c.ContinuationLogits {
				if got := Argmax(row); got != m.Continuation[i] {
					t.Errorf("continuation[%d] = %d, argmax of its logits row = %d", i, m.Continuation[i], got)
				}
				if mg := margin(row); mg < m.Checks.GreedyMinTop2Margin-1e-6 || mg < 0.01 {
					t.Errorf("continuation step %d: top-2 margin %v below recorded minimum %v", i, mg, m.Checks.GreedyMinTop2Margin)
				}
			}
			if last, ok := c.LogitsAt(len(m.IDs) - 1); ok {
				if d, same := Compare(c.ContinuationLogits[0], last); d != 0 || !same {
					t.Errorf("continuation row 0 vs logits at T-1: max|Δ| = %v, same argmax %v; want identical", d, same)
				}
			} else {
				t.Errorf("logits block does not include the last prompt position %d", len(m.IDs)-1)
			}
			if _, ok := c.MTPLogitsAt(len(m.IDs) - 2); !ok {
				t.Errorf("mtp_logits block does not include the last MTP position %d", len(m.IDs)-2)
			}
			if _, ok := c.MTPLogitsAt(len(m.IDs) - 1); ok {
				t.Errorf("mtp_logits has a row for t = T-1, which has no next token")
			}
			ck := m.Checks
			if !ck.GenerateEqualsRecompute || !ck.Float64GreedyEqual || ck.CachedDecodeVsRecomputeMaxAbs > 1e-3 ||
				ck.Float64LogitsMaxAbs > 5e-4 || ck.Float64ContinuationLogitsMaxAbs > 5e-4 ||
				ck.Float64MTPLogitsMaxAbs > 5e-4 || ck.ReloadedHFDirMaxAbs > 1e-5 {
				t.Errorf("recorded self-checks out of bounds: %+v", ck)
			}
			checkHidden(t, c)
			checkHeadProjection(t, c)
		})
	}
}

// checkHidden verifies the hidden snapshots: every layer is present, values
// are finite and non-trivial (the embedding rows non-zero, the residual
// stream rms ≥ 0.1), and a row after a zero-centred RMSNorm with weight w
// has rms between min|1+w| and max|1+w| of that norm's weight (x/rms(x)
// has rms 1), which catches a wrong row order or layout.
func checkHidden(t *testing.T, c *Case) {
	t.Helper()
	h := c.Manifest.Hidden
	if h == nil {
		t.Fatal("no hidden block")
	}
	st := filepath.Join(c.HFDir, "model.safetensors")
	gain := map[string][2]float64{}
	for name, tensor := range map[string]string{"final_norm": "model.norm.weight", "mtp.norm": "mtp.norm.weight"} {
		lo, hi := math.Inf(1), 0.0
		for _, w := range readF32Tensor(t, st, tensor) {
			g := math.Abs(1 + float64(w))
			lo, hi = math.Min(lo, g), math.Max(hi, g)
		}
		gain[name] = [2]float64{lo, hi}
	}
	want := []string{"embedding", "final_norm", "mtp.fc", "mtp.layer", "mtp.norm"}
	for i := 0; i < c.Manifest.NumHiddenLayers; i++ {
		want = append(want, fmt.Sprintf("layer.%d", i))
	}
	for _, name := range want {
		for _, pos := range h.Positions {
			row, ok := c.HiddenAt(name, pos)
			if !ok || len(row) != h.HiddenSize {
				t.Fatalf("hidden %s at %d: missing or %d wide", name, pos, len(row))
			}
			var sq float64
			for _, v := range row {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("hidden %s at %d: non-finite", name, pos)
				}
				sq += float64(v) * float64(v)
			}
			rms := math.Sqrt(sq / float64(len(row)))
			if floor := map[bool]float64{true: 1e-3, false: 0.1}[name == "embedding"]; rms < floor {
				t.Errorf("hidden %s at %d: rms %v, want a non-trivial vector (≥ %g)", name, pos, rms, floor)
			}
			if g, ok := gain[name]; ok && (rms < g[0]*(1-1e-4) || rms > g[1]*(1+1e-4)) {
				t.Errorf("hidden %s at %d: rms %v after a zero-centred RMSNorm, want within [min, max] |1+w| = [%.4g, %.4g]", name, pos, rms, g[0], g[1])
			}
		}
	}
	// The embedding snapshot is the embedding row of the token at that position.
	emb0, _ := c.HiddenAt("embedding", h.Positions[0])
	emb1, _ := c.HiddenAt("embedding", h.Positions[1])
	if c.Manifest.IDs[h.Positions[0]] != c.Manifest.IDs[h.Positions[1]] && fmt.Sprint(emb0) == fmt.Sprint(emb1) {
		t.Errorf("embedding snapshots at different tokens are identical")
	}
	if _, ok := c.HiddenAt("layer.0", -5); ok {
		t.Errorf("HiddenAt at an unrecorded position returned a row")
	}
}

// checkHeadProjection ties the files together: the embedding snapshot is the
// embedding row of the token, and lm_head applied to the final_norm (mtp.norm)
// snapshot reproduces the stored logits (MTP logits) at that position.
func checkHeadProjection(t *testing.T, c *Case) {
	t.Helper()
	st := filepath.Join(c.HFDir, "model.safetensors")
	emb := readF32Tensor(t, st, "model.embed_tokens.weight")
	head := emb
	if !c.Manifest.TieWordEmbeddings {
		head = readF32Tensor(t, st, "lm_head.weight")
	}
	H := c.Manifest.Hidden.HiddenSize
	checked := 0
	for _, pos := range c.Manifest.Hidden.Positions {
		e, _ := c.HiddenAt("embedding", pos)
		id := c.Manifest.IDs[pos]
		if d, _ := Compare(e, emb[id*H:(id+1)*H]); d != 0 {
			t.Errorf("embedding snapshot at %d differs from embed_tokens row %d by %v", pos, id, d)
		}
		for _, pair := range []struct {
			hidden string
			logits func(int) ([]float32, bool)
		}{{"final_norm", c.LogitsAt}, {"mtp.norm", c.MTPLogitsAt}} {
			want, ok := pair.logits(pos)
			if !ok {
				continue
			}
			x, _ := c.HiddenAt(pair.hidden, pos)
			got := make([]float32, len(want))
			for j := range got {
				var acc float64
				for k := 0; k < H; k++ {
					acc += float64(x[k]) * float64(head[j*H+k])
				}
				got[j] = float32(acc)
			}
			if d, same := Compare(got, want); d > 1e-4 || !same {
				t.Errorf("lm_head(%s) at %d vs stored logits: max|Δ| %v (tolerance 1e-4), same argmax %v", pair.hidden, pos, d, same)
			}
			checked++
		}
	}
	if checked < 2 {
		t.Errorf("only %d head projections checked, want at least 2 (main and MTP)", checked)
	}
}

// readF32Tensor reads one float32 tensor from a safetensors file.
func readF32Tensor(t *testing.T, path, name string) []float32 {
	t.Helper()
	hdr := readSafetensorsHeader(t, path)
	e, ok := hdr[name]
	if !ok || e.DType != "F32" {
		t.Fatalf("%s: no F32 tensor %s", path, name)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	base := 8 + int64(binary.LittleEndian.Uint64(raw))
	data := raw[base+e.Offsets[0] : base+e.Offsets[1]]
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out
}

func margin(row []float32) float64 {
	a := Argmax(row)
	second := math.Inf(-1)
	for i, v := range row {
		if i != a {
			second = math.Max(second, float64(v))
		}
	}
	return float64(row[a]) - second
}

// The committed HF dirs must be what pkg/qwen35 (the converter contract)
// expects: config parses, and the safetensors holds exactly the tensor
// inventory of Config.Tensors() (text + MTP) with HF shapes, in float32.
func TestCommittedHFDirsMatchQwen35Inventory(t *testing.T) {
	for _, dir := range committedCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(c.HFDir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			cfg, layout, err := qwen35.ParseHFConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			m := c.Manifest
			if layout != qwen35.LayoutCausalLM || cfg.VocabSize != m.VocabSize || cfg.MTPNumHiddenLayers != 1 ||
				cfg.TieWordEmbeddings != m.TieWordEmbeddings || strings.Join(cfg.LayerTypes, ",") != strings.Join(m.LayerTypes, ",") {
				t.Fatalf("config.json parsed to %+v (layout %v), manifest %+v", cfg, layout, m)
			}
			hdr := readSafetensorsHeader(t, filepath.Join(c.HFDir, "model.safetensors"))
			want := map[string][]int64{}
			for _, ts := range cfg.Tensors() {
				want[ts.HFName] = ts.HFShape
			}
			var names []string
			for name := range hdr {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				e := hdr[name]
				shape, ok := want[name]
				if !ok {
					t.Errorf("%s: not in qwen35 inventory", name)
					continue
				}
				if e.DType != "F32" || fmt.Sprint(e.Shape) != fmt.Sprint(shape) {
					t.Errorf("%s: %s %v, want F32 %v", name, e.DType, e.Shape, shape)
				}
				delete(want, name)
			}
			for name := range want {
				t.Errorf("%s: in qwen35 inventory, missing from model.safetensors", name)
			}
		})
	}
}

func rawTie(t *testing.T, configJSON []byte) bool {
	t.Helper()
	var raw struct {
		Tie *bool `json:"tie_word_embeddings"`
	}
	if err := json.Unmarshal(configJSON, &raw); err != nil || raw.Tie == nil {
		t.Fatalf("config.json: tie_word_embeddings missing or unreadable (%v)", err)
	}
	return *raw.Tie
}

// pkg/qwen35.ParseHFConfig must keep tie_word_embeddings of a text-only
// (Qwen3_5ForCausalLM) config.json (regression: a root-level field once
// shadowed it, so tied checkpoints parsed as untied).
func TestQwen35ReadsTieFlag(t *testing.T) {
	for _, dir := range committedCases(t) {
		c, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(c.HFDir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := qwen35.ParseHFConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		if want := rawTie(t, data); cfg.TieWordEmbeddings != want {
			t.Errorf("%s: ParseHFConfig tie_word_embeddings = %v, config.json %v", filepath.Base(dir), cfg.TieWordEmbeddings, want)
		}
	}
}

type stEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

func readSafetensorsHeader(t *testing.T, path string) map[string]stEntry {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 8 {
		t.Fatalf("%s: too short", path)
	}
	n := binary.LittleEndian.Uint64(raw)
	if n > uint64(len(raw)-8) {
		t.Fatalf("%s: header length %d beyond file size %d", path, n, len(raw))
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	dataLen := int64(len(raw)) - 8 - int64(n)
	out := map[string]stEntry{}
	for name, v := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e stEntry
		if err := json.Unmarshal(v, &e); err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		elems := int64(1)
		for _, d := range e.Shape {
			elems *= d
		}
		if len(e.Offsets) != 2 || e.Offsets[1]-e.Offsets[0] != 4*elems || e.Offsets[1] > dataLen {
			t.Fatalf("%s: %s: offsets %v inconsistent with shape %v", path, name, e.Offsets, e.Shape)
		}
		out[name] = e
	}
	return out
}

// copyCase copies a committed case into a temp dir for corruption tests.
func copyCase(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func editManifest(t *testing.T, dir string, f func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRejectsBadCases(t *testing.T) {
	src := committedCases(t)[0]
	block := func(m map[string]any, name string) map[string]any { return m[name].(map[string]any) }
	tests := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		wantErr string
	}{
		{"truncated logits", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "logits.f32")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-4], 0o644)
		}, "bytes, manifest shape"},
		{"NaN in mtp logits", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "mtp_logits.f32")
			b, _ := os.ReadFile(p)
			binary.LittleEndian.PutUint32(b[4*7:], math.Float32bits(float32(math.NaN())))
			os.WriteFile(p, b, 0o644)
			editManifest(t, dir, func(m map[string]any) { block(m, "mtp_logits")["sha256"] = "" })
		}, "non-finite"},
		{"flipped byte", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "continuation_logits.f32")
			b, _ := os.ReadFile(p)
			b[100] ^= 1
			os.WriteFile(p, b, 0o644)
		}, "sha256"},
		{"vocab mismatch", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { block(m, "logits")["vocab"] = 7.0 })
		}, "vocab 7"},
		{"token outside vocab", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["continuation"].([]any)[3] = 1e6 })
		}, "outside vocab_size"},
		{"mtp rows past T-1", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { block(m, "mtp_logits")["first_position"] = 200.0 })
		}, "outside the"},
		{"continuation rows misplaced", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { block(m, "continuation_logits")["first_position"] = 0.0 })
		}, "one per continuation token"},
		{"future format", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { m["format_version"] = 99.0 })
		}, "format_version 99"},
		{"path in file name", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { block(m, "logits")["file"] = "../logits.f32" })
		}, "plain file name"},
		{"hidden position past T-2", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m map[string]any) { block(m, "hidden")["positions"].([]any)[0] = 135.0 })
		}, "hidden: position 135"},
		{"truncated hidden", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "hidden.f32")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-8], 0o644)
		}, "hidden:"},
		{"missing safetensors", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model.safetensors"))
		}, "model.safetensors"},
		{"missing manifest", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ManifestName))
		}, ManifestName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyCase(t, src)
			if _, err := Load(dir); err != nil {
				t.Fatalf("pristine copy: %v", err)
			}
			tt.corrupt(t, dir)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load after %s: err = %v, want it to mention %q", tt.name, err, tt.wantErr)
			}
		})
	}
}

func TestCasesSkipsNonCases(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"b_case", "a_case", "not_a_case"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "b_case", ManifestName), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(root, "a_case", ManifestName), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(root, "stray.json"), []byte("{}"), 0o644)
	got, err := Cases(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "a_case"), filepath.Join(root, "b_case")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Cases = %v, want %v", got, want)
	}
	if _, err := Cases(filepath.Join(root, "absent")); err == nil {
		t.Fatal("Cases of a missing root: want an error")
	}
}

func TestCompareAndArgmax(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name       string
		got, want  []float32
		maxAbs     float64
		sameArgmax bool
	}{
		{"equal", []float32{1, 3, 2}, []float32{1, 3, 2}, 0, true},
		{"small diff", []float32{1, 3, 2}, []float32{1.5, 3, 2}, 0.5, true},
		{"argmax moves", []float32{1, 3, 3.5}, []float32{1, 3, 2}, 1.5, false},
		{"NaN never passes", []float32{nan, 3, 2}, []float32{1, 3, 2}, math.Inf(1), true},
		{"length mismatch", []float32{1, 2}, []float32{1, 2, 3}, math.Inf(1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, same := Compare(tt.got, tt.want)
			if d != tt.maxAbs || same != tt.sameArgmax {
				t.Fatalf("Compare = (%v, %v), want (%v, %v)", d, same, tt.maxAbs, tt.sameArgmax)
			}
		})
	}
	for _, tt := range []struct {
		row  []float32
		want int
	}{{[]float32{0, 5, 5, 1}, 1}, {[]float32{nan, -1, -2}, 1}, {[]float32{nan}, -1}, {nil, -1}} {
		if got := Argmax(tt.row); got != tt.want {
			t.Errorf("Argmax(%v) = %d, want %d", tt.row, got, tt.want)
		}
	}
}
