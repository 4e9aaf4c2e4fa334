// Package bench is ninfer-bench: it runs the reference ninfer_bench test
// matrix (pp, tg and pp+tg tests, shared/reference/ninfer-bench.md §1–§2)
// on an engine and emits the JSON-lines stream of docs/BENCH-LINES.md, from
// which pkg/report builds the schema-15 document.
//
// The package holds the CLI value rules (parsing and validation with the
// reference messages), the test matrix and max-context rules, and the run
// loop with injectable clock, memory probe and run id so that tests can
// produce byte-identical documents.
package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer/pkg/benchfmt"
)

// Defaults of the reference CLI.
const (
	DefaultCorpus       = "bench/fixtures/bench_corpus.ids"
	DefaultRepetitions  = 5
	DefaultWarmup       = 1
	DefaultPrefillChunk = 1024
	DefaultKVDtype      = "bf16"
	MaxMTPDraftTokens   = 5
)

// Output formats of ninfer-bench.
const (
	OutputJSONL = "jsonl"
	OutputJSON  = "json"
	OutputTable = "table"
	OutputCSV   = "csv"
)

// Speculative backends.
const (
	SpecNone = "none"
	SpecMTP  = "mtp"
)

// Params are the parsed and validated command-line values.
type Params struct {
	Weights      string
	Corpus       string
	Prompts      []int    // -p/--n-prompt values in argv order
	Gens         []int    // -n/--n-gen values in argv order
	Pairs        [][2]int // -pg/--prompt-gen (P,G) pairs in argv order
	Depths       []int    // -d/--n-depth context depths in argv order; nil = [0]
	Repetitions  int
	Warmup       int
	MaxCtx       int // 0 = auto
	PrefillChunk int
	KVDtype      string // bf16, int8 or fp8
	Spec         string // SpecNone or SpecMTP
	DraftTokens  int
	LMHeadDraft  bool
	NoCUDAGraph  bool
	Device       int
	Output       string
	OutputFile   string
	Backend      string // auto, cpu or cuda
	Threads      int    // 0 = all cores
	Activations  string // CPU matmul activations: auto, int8 or fp32 (backend.ParseActivations)
}

// DefaultParams returns the defaults of every flag.
func DefaultParams() Params {
	return Params{
		Corpus:       DefaultCorpus,
		Repetitions:  DefaultRepetitions,
		Warmup:       DefaultWarmup,
		PrefillChunk: DefaultPrefillChunk,
		KVDtype:      DefaultKVDtype,
		Spec:         SpecNone,
		Output:       OutputJSONL,
		Backend:      "auto",
	}
}

// parseInt parses a whole decimal integer the way std::from_chars does: an
// optional '-' and digits, nothing else (no '+', no spaces).
func parseInt(s string) (int64, bool) {
	if s == "" || s[0] == '+' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// ParseIntList parses one -p/-n value: a comma list of positive integers.
// name is "n-prompt" or "n-gen" (the reference's message stem).
func ParseIntList(name, value string) ([]int, error) {
	if value == "" {
		return nil, fmt.Errorf("%s is empty", name)
	}
	var out []int
	for _, piece := range strings.Split(value, ",") {
		v, ok := parseInt(piece)
		if !ok || v > 1<<31-1 || v < -(1<<31) {
			return nil, fmt.Errorf("invalid %s: %s", name, piece)
		}
		if v <= 0 {
			return nil, fmt.Errorf("%s must be positive", name)
		}
		out = append(out, int(v))
	}
	return out, nil
}

// ParsePairs parses one -pg value: "P,G;P,G" with positive P and G.
func ParsePairs(value string) ([][2]int, error) {
	if value == "" {
		return nil, fmt.Errorf("prompt-gen is empty")
	}
	var out [][2]int
	for _, piece := range strings.Split(value, ";") {
		p, g, ok := strings.Cut(piece, ",")
		if !ok || strings.Contains(g, ",") {
			return nil, fmt.Errorf("prompt-gen expects P,G pairs")
		}
		var pair [2]int
		for i, s := range []string{p, g} {
			v, ok := parseInt(s)
			if !ok || v > 1<<31-1 || v < -(1<<31) {
				return nil, fmt.Errorf("invalid prompt-gen: %s", s)
			}
			if v <= 0 {
				return nil, fmt.Errorf("prompt-gen must be positive")
			}
			pair[i] = int(v)
		}
		out = append(out, pair)
	}
	return out, nil
}

// ParseCount parses an integer flag value that must be ≥ min; the error is
// "invalid <name>: <value>".
func ParseCount(name, value string, min int64) (int, error) {
	v, ok := parseInt(value)
	if !ok || v < min || v > 1<<32-1 {
		return 0, fmt.Errorf("invalid %s: %s", name, value)
	}
	return int(v), nil
}

// ParseKVDtype checks a --kv-dtype value.
func ParseKVDtype(s string) (string, error) {
	switch s {
	case "bf16", "int8", "fp8":
		return s, nil
	case "nvfp4", "k8v4":
		return "", fmt.Errorf("invalid kv-dtype: %s (the reference's %s KV cache is not implemented in ninfer; use bf16, int8 or fp8)", s, s)
	}
	return "", fmt.Errorf("invalid kv-dtype: %s (want bf16, int8 or fp8)", s)
}

// ParseSpec checks a --spec value.
func ParseSpec(s string) (string, error) {
	switch s {
	case SpecMTP:
		return s, nil
	case "dflash", "dflash2":
		return "", fmt.Errorf("invalid speculative backend: %s (ninfer implements mtp only)", s)
	}
	return "", fmt.Errorf("invalid speculative backend: %s", s)
}

// ParseOutput checks an --output value.
func ParseOutput(s string) (string, error) {
	switch s {
	case OutputJSONL, OutputJSON, OutputTable, OutputCSV:
		return s, nil
	case "md": // ninfer-report's name for the same markdown table
		return OutputTable, nil
	}
	return "", fmt.Errorf("invalid output format: %s (want jsonl, json, table (md) or csv)", s)
}

// ParseBackend checks a --backend value.
func ParseBackend(s string) (string, error) {
	switch s {
	case "auto", "cpu", "cuda":
		return s, nil
	}
	return "", fmt.Errorf("invalid backend: %s (want auto, cpu or cuda)", s)
}

// PrefillChunkWant is the --prefill-chunk range in words.
const PrefillChunkWant = "a positive multiple of 128"

// RangeError is a flag value out of its range: "--FLAG VALUE: out of range
// (want WANT)", the words of the tools' cliutil.OutOfRange. Flag is the long
// name without dashes, so that a command line can name the flag as the
// user typed it.
type RangeError struct {
	Flag  string // long name: "prefill-chunk"
	Value string
	Want  string // the valid range in words: "1..5"
}

func (e RangeError) Error() string {
	return fmt.Sprintf("--%s %s: out of range (want %s)", e.Flag, e.Value, e.Want)
}

// Validate runs the reference's post-parse checks, in order: --weights is
// present, the prefill chunk is a positive multiple of 128, and the
// speculative options are consistent. A value out of range is a RangeError.
func (p *Params) Validate() error {
	if p.Weights == "" {
		return fmt.Errorf("--weights is required")
	}
	if p.PrefillChunk < 128 || p.PrefillChunk%128 != 0 {
		return RangeError{"prefill-chunk", strconv.Itoa(p.PrefillChunk), PrefillChunkWant}
	}
	if p.Spec == "" {
		p.Spec = SpecNone
	}
	switch p.Spec {
	case SpecNone:
		if p.DraftTokens != 0 || p.LMHeadDraft {
			return fmt.Errorf("--draft-tokens and --lm-head-draft require --spec mtp|dflash|dflash2")
		}
	case SpecMTP:
		if p.DraftTokens == 0 {
			return fmt.Errorf("--spec mtp requires --draft-tokens in [1,%d]", MaxMTPDraftTokens)
		}
		if p.DraftTokens < 1 || p.DraftTokens > MaxMTPDraftTokens {
			return RangeError{"draft-tokens", strconv.Itoa(p.DraftTokens), fmt.Sprintf("1..%d", MaxMTPDraftTokens)}
		}
	default:
		return fmt.Errorf("invalid speculative backend: %s", p.Spec)
	}
	return nil
}

// Test is one entry of the test matrix.
type Test struct {
	Label   string
	Kind    string // benchfmt.KindPP, KindTG or KindPPTG
	NPrompt int    // 0 for tg tests
	NGen    int    // 0 for pp tests
	NDepth  int    // context depth (-d): tokens prefilled, untimed, before each rep
}

// HasPrefill reports whether the test measures a prompt prefill.
func (t Test) HasPrefill() bool { return benchfmt.HasPrefill(t.Kind) }

// HasDecode reports whether the test decodes NGen tokens.
func (t Test) HasDecode() bool { return benchfmt.HasDecode(t.Kind) }

// PromptTokens is the prompt length of one rep: P, or the one-token seed of
// a tg test.
func (t Test) PromptTokens() int {
	if t.Kind == benchfmt.KindTG {
		return 1
	}
	return t.NPrompt
}

// RequestedOutputTokens is G+1 for decoding tests and 1 for pp tests.
func (t Test) RequestedOutputTokens() int {
	return int(benchfmt.RequestedOutputTokens(t.Kind, int64(t.NGen)))
}

func newTest(kind string, p, g int) Test {
	return Test{Label: benchfmt.Label(kind, int64(p), int64(g)), Kind: kind, NPrompt: p, NGen: g}
}

// ExpandTests returns the test matrix: all pp tests, then all tg, then all
// pp+tg, each in argv order, duplicates kept; pp512 and tg128 when no test
// flag was given.
func ExpandTests(prompts, gens []int, pairs [][2]int) []Test {
	if len(prompts) == 0 && len(gens) == 0 && len(pairs) == 0 {
		return []Test{newTest(benchfmt.KindPP, 512, 0), newTest(benchfmt.KindTG, 0, 128)}
	}
	var out []Test
	for _, p := range prompts {
		out = append(out, newTest(benchfmt.KindPP, p, 0))
	}
	for _, g := range gens {
		out = append(out, newTest(benchfmt.KindTG, 0, g))
	}
	for _, pg := range pairs {
		out = append(out, newTest(benchfmt.KindPPTG, pg[0], pg[1]))
	}
	return out
}

// PrimeOutputs is the output count of the untimed decode-graph prime: 3
// without a speculative backend, else 2(k+1)+1.
func PrimeOutputs(spec string, k int) int {
	if spec == "" || spec == SpecNone {
		return 3
	}
	return 2*(k+1) + 1
}

// ContextNeed is the context a test (or the graph prime) requires.
type ContextNeed struct {
	Who    string // the test label, or "decode graph prime"
	Tokens int
}

// RequiredContext returns the largest context requirement of the tests:
// (tg ? 1 : P) + (decode ? G : 0) + (mtp ? 2k : 0) per test, and, when CUDA
// graphs are on and a test decodes, the prime candidate
// PrimeOutputs + (mtp ? 2k : 0). The first of equal maxima wins.
func RequiredContext(tests []Test, spec string, k int, graph bool) ContextNeed {
	margin := 0
	if spec == SpecMTP {
		margin = 2 * k
	}
	var best ContextNeed
	decodes := false
	for _, t := range tests {
		n := t.NDepth + t.PromptTokens() + margin
		if t.HasDecode() {
			n += t.NGen
			decodes = true
		}
		if n > best.Tokens {
			best = ContextNeed{t.DisplayLabel(), n}
		}
	}
	if graph && decodes {
		if n := PrimeOutputs(spec, k) + margin; n > best.Tokens {
			best = ContextNeed{"decode graph prime", n}
		}
	}
	return best
}

// ResolveMaxContext returns the max context of the run: the requirement, or
// the --max-ctx override (0 = auto) when it is not below the requirement.
func ResolveMaxContext(override int, need ContextNeed) (int, error) {
	if override == 0 {
		return need.Tokens, nil
	}
	if override < need.Tokens {
		return 0, fmt.Errorf("--max-ctx %d is too small; %s needs %d", override, need.Who, need.Tokens)
	}
	return override, nil
}

// CheckModelContext checks the resolved max context against the model's
// max_position_embeddings (0: no limit) before anything is allocated for it;
// the memory plan would refuse it too, but only after the engine allocated
// the KV cache.
func CheckModelContext(maxCtx, override int, need ContextNeed, maxPositions int) error {
	if maxPositions <= 0 || maxCtx <= maxPositions {
		return nil
	}
	if override > 0 {
		return fmt.Errorf("--max-ctx %d exceeds the model's max_position_embeddings %d", override, maxPositions)
	}
	return fmt.Errorf("%s needs %d tokens of context, above the model's max_position_embeddings %d", need.Who, need.Tokens, maxPositions)
}

// CheckCorpus checks that the corpus seeds decode tests and holds every
// prompt: "corpus is too small to seed decode tests" for an empty corpus,
// "<label> exceeds the token-id corpus" for P > corpus size.
func CheckCorpus(tests []Test, corpusTokens int) error {
	if corpusTokens < 1 {
		return fmt.Errorf("corpus is too small to seed decode tests")
	}
	for _, t := range tests {
		if t.NDepth > 0 && t.NDepth+t.PromptTokens() > corpusTokens {
			// The depth comes from the corpus too, followed by the prompt.
			return fmt.Errorf("%s exceeds the token-id corpus (depth %d + prompt %d tokens, corpus %d)",
				t.DisplayLabel(), t.NDepth, t.PromptTokens(), corpusTokens)
		}
		if t.HasPrefill() && t.NPrompt > corpusTokens {
			return fmt.Errorf("%s exceeds the token-id corpus", t.Label)
		}
	}
	return nil
}

// DecodePath is config.decode_path: cuda_graph or eager, prefixed with the
// speculative backend ("mtp_eager").
func DecodePath(spec string, graph bool) string {
	path := "eager"
	if graph {
		path = "cuda_graph"
	}
	if spec != "" && spec != SpecNone {
		path = spec + "_" + path
	}
	return path
}
