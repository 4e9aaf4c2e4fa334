package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/gpu"
	"github.com/ninfer/ninfer/pkg/layout"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/recipe"
)

// tinyConfig is a 4-layer Qwen3.5 text config with one MTP layer.
func tinyConfig() qwen35.Config {
	return qwen35.Config{
		VocabSize: 1000, HiddenSize: 64, NumHiddenLayers: 4, IntermediateSize: 128,
		NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 32, LinearConvKernelDim: 4,
		LinearKeyHeadDim: 16, LinearValueHeadDim: 16, LinearNumKeyHeads: 2, LinearNumValueHeads: 4,
		LayerTypes: []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"},
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, MTPNumHiddenLayers: 1,
		MaxPositionEmbeddings: 32768, AttnOutputGate: true,
	}
}

// writeConfig writes an HF text-only config.json for tinyConfig.
func writeConfig(t *testing.T, dir string) string {
	t.Helper()
	c := tinyConfig()
	doc := map[string]any{
		"architectures": []string{"Qwen3_5ForCausalLM"}, "model_type": "qwen3_5_text",
		"vocab_size": c.VocabSize, "hidden_size": c.HiddenSize, "num_hidden_layers": c.NumHiddenLayers,
		"intermediate_size": c.IntermediateSize, "num_attention_heads": c.NumAttentionHeads,
		"num_key_value_heads": c.NumKeyValueHeads, "head_dim": c.HeadDim, "linear_conv_kernel_dim": 4,
		"linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
		"linear_num_value_heads": 4, "layer_types": c.LayerTypes, "rms_norm_eps": 1e-6,
		"rope_theta": 1e7, "partial_rotary_factor": 0.25, "max_position_embeddings": 32768,
		"mtp_num_hidden_layers": 1, "hidden_act": "silu",
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeArtifact writes a sparse .ninfer (header and directory only) holding
// tinyConfig's inventory in groupwise-int, the proposal head and a resource.
func writeArtifact(t *testing.T, dir string) (string, int64) {
	t.Helper()
	c := tinyConfig()
	r, _ := recipe.Lookup("groupwise-int")
	as, err := r.Assign(append(c.Tensors(), recipe.ProposalTensors(c)...))
	if err != nil {
		t.Fatal(err)
	}
	p := artifact.NewPlan(artifact.Meta{Name: "tiny", Config: c, ProposalSource: "test",
		Metadata: map[string]any{"recipe": "groupwise-int"}})
	if err := p.AddResource("frontend/tokenizer.json", artifact.ComponentFrontend, 1000); err != nil {
		t.Fatal(err)
	}
	var textBytes int64
	for _, a := range as {
		if err := p.AddTensor(a.Tensor.Name, a.Tensor.Component, a.Format, a.Tensor.Shape); err != nil {
			t.Fatal(err)
		}
		if a.Tensor.Component == qwen35.ComponentText {
			// bound as the engine binds it: vectors widened to fp32
			n := int64(1)
			for _, d := range a.Tensor.Shape {
				n *= d
			}
			textBytes += layout.AlignUp(layout.BoundBytes(a.Tensor.Class, n, a.Bytes))
		}
	}
	path := filepath.Join(dir, "tiny.ninfer")
	if err := artifact.WriteSparse(path, p); err != nil {
		t.Fatal(err)
	}
	return path, textBytes
}

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"ninfer-plan"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--gpu", "h200"}, "--weights or --config is required"},
		{[]string{"--config", cfg}, "give exactly one of --device-memory, --gpu or --available"},
		{[]string{"--config", cfg, "--gpu", "h200", "--device-memory", "8GiB"}, "give exactly one of"},
		{[]string{"--config", cfg, "--weights", "x.ninfer", "--gpu", "h200"}, "mutually exclusive"},
		{[]string{"--config", cfg, "--gpu", "h999"}, `unknown GPU "h999"`},
		{[]string{"--config", cfg, "--device-memory", "24XB"}, `--device-memory: invalid size "24XB"`},
		{[]string{"--config", cfg, "--gpu", "h200", "--kv-dtype", "nvfp4"}, `invalid kv-dtype "nvfp4"`},
		{[]string{"--config", cfg, "--gpu", "h200", "--spec", "dflash"}, "invalid speculative backend: dflash"},
		{[]string{"--config", cfg, "--gpu", "h200", "--spec", "mtp"}, "--spec mtp requires --draft-tokens in [1,5]"},
		{[]string{"--config", cfg, "--gpu", "h200", "--draft-tokens", "2"}, "--draft-tokens and --lm-head-draft require --spec mtp"},
		{[]string{"--config", cfg, "--gpu", "h200", "--spec", "mtp", "--draft-tokens", "0"}, "--draft-tokens 0: out of range (want 1..5)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--prefill-chunk", "100"}, "--prefill-chunk 100: out of range (want a positive multiple of 128)"},
		{[]string{"--config", cfg, "--gpu", "h200", "-prefill-chunk", "0"}, "-prefill-chunk 0: out of range (want a positive multiple of 128)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--prefill-chunk", "-256"}, "--prefill-chunk -256: out of range (want a positive multiple of 128)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--prefill-chunk", "1k"}, "--prefill-chunk 1k: not an integer (want a positive multiple of 128)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--prefill-chunk", "99999999999999999999"}, "--prefill-chunk 99999999999999999999: out of range (want a positive multiple of 128)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--max-ctx", "abc"}, "--max-ctx abc: not an integer (want 1..9223372036854775807)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--kv-capacity", "-5"}, "--kv-capacity -5: out of range (want 1..9223372036854775807)"},
		{[]string{"--config", cfg, "--gpu", "h200", "--recipe", "q3"}, `--recipe "q3": unknown recipe (want bf16, q8, groupwise-int, nvfp4-mlp, fp8, fp32)`},
		{[]string{"--config", cfg, "--gpu", "h200", "--bogus"}, "flag provided but not defined: --bogus"},
		{[]string{"--config", cfg, "--gpu", "h200", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		code, out, errs := runCmd(tc.args...)
		if code != 2 || out != "" || !strings.HasPrefix(errs, "ninfer-plan: ") || !strings.Contains(errs, tc.want) ||
			strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d stdout %q stderr %q; want exit 2 and one line containing %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestRuntimeErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"architectures":["LlamaForCausalLM"]}`), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--config", filepath.Join(dir, "missing.json"), "--gpu", "h200"}, "read config:"},
		{[]string{"--config", bad, "--gpu", "h200"}, "unsupported architecture"},
		{[]string{"--weights", filepath.Join(dir, "missing.ninfer"), "--gpu", "h200"}, "open artifact:"},
		{[]string{"--config", cfg, "--device-memory", "100KiB"}, "weights do not fit"},
		{[]string{"--config", cfg, "--available", "10MiB", "--max-ctx", "4096"}, "requested Engine runtime reservation requires"},
		{[]string{"--config", cfg, "--available", "2GiB", "--max-ctx", "4096", "--kv-capacity", "8192"}, "must be within [64, 64] page groups"},
	}
	for _, tc := range tests {
		code, out, errs := runCmd(tc.args...)
		if code != 1 || out != "" || !strings.HasPrefix(errs, "ninfer-plan: ") || !strings.Contains(errs, tc.want) ||
			strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d stdout %q stderr %q; want exit 1 and one line containing %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// TestSmallBudgetHeadroom: a small CPU budget plans with the auto headroom
// min(1 GiB, A/4) (it used to be refused with "only -536870912 bytes are
// available"), --headroom 0 keeps none (it used to be an invalid size), and
// no refusal prints a negative size.
func TestSmallBudgetHeadroom(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	ok := []struct {
		args     []string
		headroom int64
	}{
		{[]string{"--available", "512MiB"}, 128 << 20},
		{[]string{"--available", "512MiB", "--max-ctx", "2048"}, 128 << 20},
		{[]string{"--available", "512MiB", "--headroom", "0"}, 0},
		{[]string{"--available", "512MiB", "--headroom", "0GiB"}, 0},
		{[]string{"--available", "512MiB", "--headroom", "100MiB"}, 100 << 20},
		{[]string{"--available", "16GiB"}, 1 << 30},
	}
	for _, tc := range ok {
		args := append([]string{"--config", cfg, "--backend", "cpu", "--json"}, tc.args...)
		code, out, errs := runCmd(args...)
		if code != 0 || errs != "" {
			t.Errorf("%v: exit %d stderr %q", tc.args, code, errs)
			continue
		}
		m := gjson.Parse(out)
		if got := m.Get("kv_capacity_headroom_bytes").Int(); got != tc.headroom || m.Get("kv_capacity_mode").String() != "auto" ||
			m.Get("planned_slack_bytes").Int() < tc.headroom {
			t.Errorf("%v: headroom %d slack %d, want headroom %d", tc.args, got, m.Get("planned_slack_bytes").Int(), tc.headroom)
		}
	}
	negative := regexp.MustCompile(`-[0-9]`)
	refused := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--backend", "cpu", "--available", "512MiB", "--headroom", "2GiB"}, 1,
			"ninfer-plan: requested Engine runtime reservation requires 177664 bytes, but no bytes are available for runtime capacity (the 2147483648-byte auto-capacity headroom is not less than the 536870912 bytes available after the weights; --headroom 536693248 or less would fit it)\n"},
		{[]string{"--device-memory", "600MiB", "--headroom", "2GiB", "--max-ctx", "4096"}, 1, "or less would fit it"},
		{[]string{"--backend", "cpu", "--available", "1MiB", "--max-ctx", "32768"}, 1, "even --headroom 0 leaves it"},
		{[]string{"--device-memory", "100MiB"}, 1, "weights do not fit: 56 device objects need 391424 bytes and the runtime overhead 536870912 bytes, 537262336 bytes together, but the device has 104857600 bytes"},
		{[]string{"--backend", "cpu", "--available", "512MiB", "--headroom", "-1"}, 2, `--headroom: invalid size "-1"`},
		{[]string{"--backend", "cpu", "--available", "512MiB", "--headroom", "0.5B"}, 2, "must be a non-negative whole number of bytes"},
		{[]string{"--backend", "cpu", "--available", "512MiB", "--kv-capacity", "2048", "--headroom", "0"}, 2, "--headroom applies to --kv-capacity auto only"},
	}
	for _, tc := range refused {
		code, out, errs := runCmd(append([]string{"--config", cfg}, tc.args...)...)
		if code != tc.code || out != "" || !strings.HasPrefix(errs, "ninfer-plan: ") || !strings.Contains(errs, tc.want) ||
			strings.Count(errs, "\n") != 1 || negative.MatchString(strings.TrimPrefix(errs, "ninfer-plan: --headroom: invalid size \"-1\"")) {
			t.Errorf("%v: exit %d stdout %q stderr %q; want exit %d, one line containing %q and no negative size", tc.args, code, out, errs, tc.code, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, errs := runCmd("--help")
	if code != 0 || errs != "" || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--kv-capacity") ||
		!strings.Contains(out, "groupwise-int") || !strings.Contains(out, "rtx-4090") ||
		!strings.Contains(out, "the smaller of 1 GiB and A/4") || !strings.Contains(out, "--headroom 0 keeps none") {
		t.Errorf("--help: exit %d stderr %q stdout %q", code, errs, out)
	}
}

// TestJSONKeysMatchSeed checks that --json prints the memory object with
// the seed report's keys in the seed's order (nested arenas included).
func TestJSONKeysMatchSeed(t *testing.T) {
	seed, err := os.ReadFile("../../pkg/plan/testdata/seed_memory.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	code, out, errs := runCmd("--config", cfg, "--gpu", "rtx-4090", "--spec", "mtp", "--draft-tokens", "2",
		"--kv-dtype", "fp8", "--max-ctx", "8192", "--kv-capacity", "8192", "--json")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if k1, k2 := keys(gjson.Parse(out)), keys(gjson.ParseBytes(seed)); k1 != k2 {
		t.Errorf("keys differ:\n got %s\nseed %s", k1, k2)
	}
	m := gjson.Parse(out)
	if m.Get("kv_cache").String() != "fp8-e4m3-row256" || m.Get("kv_capacity").Int() != 8192 ||
		m.Get("kv_capacity_mode").String() != "explicit" || m.Get("cuda_graph_allowance_bytes").Int() != 82<<20 ||
		m.Get("vision_workspace").Type != gjson.Null {
		t.Errorf("unexpected values: %s", out)
	}
	// 1 full layer and the engine's MTP cache (1 layer over the same 128
	// pages; docs/PLAN.md §2.9), kv_heads 1, head_dim 32: fp8 B = 64+4.
	if got, want := m.Get("kv_payload_bytes").Int(), int64((128+128)*64*68); got != want {
		t.Errorf("kv_payload_bytes %d, want %d", got, want)
	}
}

// keys lists the object's keys in order, recursing into object values.
func keys(r gjson.Result) string {
	var b strings.Builder
	r.ForEach(func(k, v gjson.Result) bool {
		b.WriteString(k.String())
		if v.IsObject() {
			b.WriteString("{" + keys(v) + "}")
		}
		b.WriteString(",")
		return true
	})
	return b.String()
}

// TestWeightsArtifact plans from a sparse .ninfer header: the device objects
// follow --spec and --lm-head-draft; the frontend resource never counts.
func TestWeightsArtifact(t *testing.T) {
	dir := t.TempDir()
	path, textBytes := writeArtifact(t, dir)
	code, out, errs := runCmd("--weights", path, "--available", "2GiB", "--max-ctx", "4096", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got := gjson.Get(out, "weights.capacity_bytes").Int(); got != textBytes {
		t.Errorf("weights %d, want text only %d", got, textBytes)
	}
	code, out, errs = runCmd("--weights", path, "--available", "2GiB", "--max-ctx", "4096", "--spec", "mtp",
		"--draft-tokens", "3", "--lm-head-draft", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got := gjson.Get(out, "weights.capacity_bytes").Int(); got <= textBytes {
		t.Errorf("weights with mtp and proposal head %d, want more than text %d", got, textBytes)
	}
	// the same model planned from its config must agree on everything.
	cfg := writeConfig(t, dir)
	_, out2, errs2 := runCmd("--config", cfg, "--available", "2GiB", "--max-ctx", "4096", "--spec", "mtp",
		"--draft-tokens", "3", "--lm-head-draft", "--json")
	if out2 != out {
		t.Errorf("--config plan differs from --weights plan (%s):\n%s\n%s", errs2, out2, out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestTableAndOutputFile(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	code, out, errs := runCmd("--config", cfg, "--device-memory", "2GiB")
	if code != 0 || !strings.Contains(out, "| section") || !strings.Contains(out, "kv capacity (auto)") ||
		!strings.Contains(out, "32,768") {
		t.Fatalf("table: exit %d stderr %q\n%s", code, errs, out)
	}
	dst := filepath.Join(dir, "mem.json")
	code, out, errs = runCmd("--config", cfg, "--backend", "cpu", "--available", "512MiB", "--max-ctx", "2048", "--kv-capacity", "2048", "--json", "-o", dst)
	if code != 0 || out != "" || !strings.Contains(errs, "ninfer-plan: wrote "+dst) {
		t.Fatalf("-o: exit %d stdout %q stderr %q", code, out, errs)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if g := gjson.ParseBytes(b); g.Get("cuda_graph_allowance_bytes").Int() != 0 || g.Get("available_after_weights_bytes").Int() != 512<<20 {
		t.Errorf("cpu plan: %s", b)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".mem.json.tmp-*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// TestOutputFilePaths: -o is --output-file here, so "-o json" (ninfer-bench's
// spelling of the format) and a directory are usage errors before any work;
// missing parents are created and the file is 0644 like every tool's output.
func TestOutputFilePaths(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	base := []string{"--config", cfg, "--backend", "cpu", "--available", "512MiB", "--max-ctx", "2048", "--kv-capacity", "2048"}
	for _, c := range []struct{ out, want string }{
		{"json", "ninfer-plan: --output-file json: that is a format name, not a file; for the format use --format json (for a file of that name: ./json)\n"},
		{dir, "ninfer-plan: --output-file " + dir + ": is a directory (want a file path)\n"},
	} {
		code, out, errs := runCmd(append(base, "-o", c.out)...)
		if code != 2 || out != "" || errs != c.want {
			t.Errorf("-o %s: exit %d stdout %q stderr %q; want 2 and %q", c.out, code, out, errs, c.want)
		}
	}
	dst := filepath.Join(dir, "new dir", "plan.md")
	if code, _, errs := runCmd(append(base, "-o", dst)...); code != 0 || errs != "ninfer-plan: wrote "+dst+"\n" {
		t.Fatalf("-o into a missing directory: exit %d stderr %q", code, errs)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("output %v, err %v; want mode 0644", fi, err)
	}
}

// --backend takes the same values as in ninfer-run and ninfer-bench; auto
// asks the machine (probeGPU) and says what it chose.
func TestBackendAuto(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	base := []string{"--config", cfg, "--device-memory", "8GiB", "--max-ctx", "2048", "--kv-capacity", "2048", "--format", "json"}
	plan := func(t *testing.T, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runCmd(append(base, args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d stderr %q", args, code, errs)
		}
		return out, errs
	}
	cuda, _ := plan(t, "--backend", "cuda")
	cpu, _ := plan(t, "--backend", "cpu")
	if cuda == cpu {
		t.Fatal("the cuda and cpu plans are the same")
	}
	defer func(p func(int) (gpu.Card, error)) { probeGPU = p }(probeGPU)
	for _, tc := range []struct {
		name  string
		probe func(int) (gpu.Card, error)
		want  string // the plan it must equal
		note  string
	}{
		{"gpu", func(int) (gpu.Card, error) { return gpu.Card{Name: "NVIDIA H200", MemoryBytes: 140 << 30}, nil }, cuda,
			"ninfer-plan: note: --backend auto: planning for cuda (this machine's GPU 0: NVIDIA H200)\n"},
		{"no gpu", func(int) (gpu.Card, error) { return gpu.Card{}, errors.New("nvidia-smi: not found") }, cpu,
			"ninfer-plan: note: --backend auto: planning for cpu (no GPU here: nvidia-smi: not found)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probeGPU = tc.probe
			out, errs := plan(t, "--backend", "auto")
			if out != tc.want || errs != tc.note {
				t.Errorf("auto: stderr %q (want %q); plan equal to the expected backend's: %v", errs, tc.note, out == tc.want)
			}
			if _, errs := plan(t, "--backend", "auto", "-q"); errs != "" {
				t.Errorf("--quiet: stderr %q", errs)
			}
			// A usage error stays one line: no note before it.
			if code, _, errs := runCmd(append(base, "--backend", "auto", "--available", "1GiB")...); code != 2 || strings.Count(errs, "\n") != 1 {
				t.Errorf("usage error: exit %d, stderr %q", code, errs)
			}
		})
	}
	if code, _, errs := runCmd(append(base, "--backend", "metal")...); code != 2 || errs != "ninfer-plan: invalid backend: metal (want auto, cpu or cuda)\n" {
		t.Errorf("--backend metal: exit %d stderr %q", code, errs)
	}
}

// --format json, -f json and --json are the same output; table and md the
// same table; --json against another --format is a usage error.
func TestFormatSpellings(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir)
	base := []string{"--config", cfg, "--backend", "cpu", "--available", "512MiB", "--max-ctx", "2048", "--kv-capacity", "2048"}
	outs := map[string]string{}
	for _, f := range [][]string{{"--json"}, {"--format", "json"}, {"-f", "json"}, {}, {"--format", "table"}, {"-f", "md"}} {
		code, out, errs := runCmd(append(base, f...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d stderr %q", f, code, errs)
		}
		outs[strings.Join(f, " ")] = out
	}
	if outs["--json"] != outs["--format json"] || outs["--json"] != outs["-f json"] || !gjson.Valid(outs["--json"]) {
		t.Error("--json, --format json and -f json differ")
	}
	if outs[""] != outs["--format table"] || outs[""] != outs["-f md"] || !strings.Contains(outs[""], "| section") {
		t.Error("the default, --format table and -f md differ")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "csv"}, `ninfer-plan: --format "csv": want table (md) or json` + "\n"},
		{[]string{"--json", "--format", "table"}, "ninfer-plan: --json is --format json; it contradicts --format table\n"},
	} {
		if code, out, errs := runCmd(append(base, c.args...)...); code != 2 || out != "" || errs != c.want {
			t.Errorf("%q: exit %d stdout %q stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	dst := filepath.Join(dir, "p.md")
	if code, _, errs := runCmd(append(base, "-q", "-o", dst)...); code != 0 || errs != "" {
		t.Errorf("-q -o: exit %d stderr %q; want no wrote line", code, errs)
	}
}
