package bench

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// checkParse checks one parse result: exactly the error text wantErr when
// it is set, else no error and the value want.
func checkParse[T any](t *testing.T, call string, got T, err error, want T, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Errorf("%s error = %v, want %q", call, err, wantErr)
		}
		return
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, %v; want %v", call, got, err, want)
	}
}

func TestParseIntList(t *testing.T) {
	cases := []struct {
		value   string
		want    []int
		wantErr string
	}{
		{"512", []int{512}, ""},
		{"1,2,3", []int{1, 2, 3}, ""},
		{"128,128", []int{128, 128}, ""},
		{"", nil, "n-prompt is empty"},
		{"abc", nil, "invalid n-prompt: abc"},
		{"12x", nil, "invalid n-prompt: 12x"},
		{"+5", nil, "invalid n-prompt: +5"},
		{" 5", nil, "invalid n-prompt:  5"},
		{"1,,2", nil, "invalid n-prompt: "},
		{"0", nil, "n-prompt must be positive"},
		{"4,-3", nil, "n-prompt must be positive"},
		{"99999999999", nil, "invalid n-prompt: 99999999999"},
	}
	for _, c := range cases {
		got, err := ParseIntList("n-prompt", c.value)
		checkParse(t, fmt.Sprintf("ParseIntList(%q)", c.value), got, err, c.want, c.wantErr)
	}
	if _, err := ParseIntList("n-gen", "0"); err == nil || err.Error() != "n-gen must be positive" {
		t.Errorf("n-gen message: %v", err)
	}
}

func TestParsePairs(t *testing.T) {
	cases := []struct {
		value   string
		want    [][2]int
		wantErr string
	}{
		{"2048,512", [][2]int{{2048, 512}}, ""},
		{"2048,512;8192,512", [][2]int{{2048, 512}, {8192, 512}}, ""},
		{"", nil, "prompt-gen is empty"},
		{"2048", nil, "prompt-gen expects P,G pairs"},
		{"1,2,3", nil, "prompt-gen expects P,G pairs"},
		{"1,2;3", nil, "prompt-gen expects P,G pairs"},
		{"a,2", nil, "invalid prompt-gen: a"},
		{"1,", nil, "invalid prompt-gen: "},
		{"0,5", nil, "prompt-gen must be positive"},
		{"5,-1", nil, "prompt-gen must be positive"},
	}
	for _, c := range cases {
		got, err := ParsePairs(c.value)
		checkParse(t, fmt.Sprintf("ParsePairs(%q)", c.value), got, err, c.want, c.wantErr)
	}
}

func TestParseCount(t *testing.T) {
	cases := []struct {
		name, value string
		min         int64
		want        int
		wantErr     string
	}{
		{"repetitions", "3", 1, 3, ""},
		{"repetitions", "0", 1, 0, "invalid repetitions: 0"},
		{"warmup", "0", 0, 0, ""},
		{"warmup", "-1", 0, 0, "invalid warmup: -1"},
		{"max-ctx", "16384", 1, 16384, ""},
		{"max-ctx", "16k", 1, 0, "invalid max-ctx: 16k"},
		{"max-ctx", "4294967296", 1, 0, "invalid max-ctx: 4294967296"},
		{"draft-tokens", "0", 1, 0, "invalid draft-tokens: 0"},
		{"device", "", 0, 0, "invalid device: "},
	}
	for _, c := range cases {
		got, err := ParseCount(c.name, c.value, c.min)
		checkParse(t, fmt.Sprintf("ParseCount(%s, %q)", c.name, c.value), got, err, c.want, c.wantErr)
	}
}

func TestParseEnums(t *testing.T) {
	for _, c := range []struct {
		fn      func(string) (string, error)
		in      string
		wantErr string // "" = accepted
	}{
		{ParseKVDtype, "bf16", ""}, {ParseKVDtype, "int8", ""}, {ParseKVDtype, "fp8", ""},
		{ParseKVDtype, "nvfp4", "invalid kv-dtype: nvfp4"}, {ParseKVDtype, "fp16", "invalid kv-dtype: fp16"},
		{ParseSpec, "mtp", ""}, {ParseSpec, "dflash", "invalid speculative backend: dflash"},
		{ParseSpec, "eagle", "invalid speculative backend: eagle"},
		{ParseOutput, "jsonl", ""}, {ParseOutput, "json", ""}, {ParseOutput, "table", ""}, {ParseOutput, "csv", ""},
		{ParseOutput, "xml", "invalid output format: xml (want jsonl, json, table (md) or csv)"},
		{ParseBackend, "auto", ""}, {ParseBackend, "cpu", ""}, {ParseBackend, "cuda", ""},
		{ParseBackend, "metal", "invalid backend: metal"},
	} {
		got, err := c.fn(c.in)
		if c.wantErr == "" {
			if err != nil || got != c.in {
				t.Errorf("%q: got %q, %v", c.in, got, err)
			}
		} else if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
			t.Errorf("%q: error %v, want prefix %q", c.in, err, c.wantErr)
		}
	}
}

// "md" is ninfer-report's name for the markdown table; bench accepts it too.
func TestParseOutputMDAlias(t *testing.T) {
	if got, err := ParseOutput("md"); err != nil || got != OutputTable {
		t.Errorf("ParseOutput(md) = %q, %v; want %q", got, err, OutputTable)
	}
}

func TestValidate(t *testing.T) {
	base := func(mut func(*Params)) Params {
		p := DefaultParams()
		p.Weights = "m.ninfer"
		mut(&p)
		return p
	}
	cases := []struct {
		name    string
		p       Params
		wantErr string
	}{
		{"ok", base(func(*Params) {}), ""},
		{"no weights", base(func(p *Params) { p.Weights = "" }), "--weights is required"},
		// weights is checked before the chunk alignment
		{"order", base(func(p *Params) { p.Weights = ""; p.PrefillChunk = 100 }), "--weights is required"},
		{"chunk", base(func(p *Params) { p.PrefillChunk = 100 }), "--prefill-chunk 100: out of range (want a positive multiple of 128)"},
		{"chunk 0", base(func(p *Params) { p.PrefillChunk = 0 }), "--prefill-chunk 0: out of range (want a positive multiple of 128)"},
		{"chunk -128", base(func(p *Params) { p.PrefillChunk = -128 }), "--prefill-chunk -128: out of range (want a positive multiple of 128)"},
		{"chunk before spec", base(func(p *Params) { p.PrefillChunk = 129; p.DraftTokens = 2 }), "--prefill-chunk 129: out of range (want a positive multiple of 128)"},
		{"chunk 256", base(func(p *Params) { p.PrefillChunk = 256 }), ""},
		{"k without spec", base(func(p *Params) { p.DraftTokens = 2 }), "--draft-tokens and --lm-head-draft require --spec mtp|dflash|dflash2"},
		{"head without spec", base(func(p *Params) { p.LMHeadDraft = true }), "--draft-tokens and --lm-head-draft require --spec mtp|dflash|dflash2"},
		{"mtp without k", base(func(p *Params) { p.Spec = SpecMTP }), "--spec mtp requires --draft-tokens in [1,5]"},
		{"mtp k 6", base(func(p *Params) { p.Spec = SpecMTP; p.DraftTokens = 6 }), "--draft-tokens 6: out of range (want 1..5)"},
		{"mtp k -1", base(func(p *Params) { p.Spec = SpecMTP; p.DraftTokens = -1 }), "--draft-tokens -1: out of range (want 1..5)"},
		{"mtp k 5 head", base(func(p *Params) { p.Spec = SpecMTP; p.DraftTokens = 5; p.LMHeadDraft = true }), ""},
	}
	for _, c := range cases {
		err := c.p.Validate()
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", c.name, err)
			}
		} else if err == nil || err.Error() != c.wantErr {
			t.Errorf("%s: error %v, want %q", c.name, err, c.wantErr)
		} else if re := (RangeError{}); strings.Contains(c.wantErr, "out of range") != errors.As(err, &re) {
			t.Errorf("%s: error %v: RangeError %v, want it for an out-of-range value only", c.name, err, errors.As(err, &re))
		}
	}
}

func labels(ts []Test) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Label + "/" + t.Kind
	}
	return out
}

func TestExpandTests(t *testing.T) {
	cases := []struct {
		name    string
		prompts []int
		gens    []int
		pairs   [][2]int
		want    []string
	}{
		{"default", nil, nil, nil, []string{"pp512/pp", "tg128/tg"}},
		{"only tg", nil, []int{256, 1024}, nil, []string{"tg256/tg", "tg1024/tg"}},
		{"order and duplicates", []int{64, 32, 64}, []int{8}, [][2]int{{16, 4}, {16, 4}},
			[]string{"pp64/pp", "pp32/pp", "pp64/pp", "tg8/tg", "pp16+tg4/pp+tg", "pp16+tg4/pp+tg"}},
		{"seed report", nil, []int{256, 1024}, [][2]int{{2048, 512}, {8192, 512}},
			[]string{"tg256/tg", "tg1024/tg", "pp2048+tg512/pp+tg", "pp8192+tg512/pp+tg"}},
	}
	for _, c := range cases {
		got := labels(ExpandTests(c.prompts, c.gens, c.pairs))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	ts := ExpandTests([]int{7}, []int{5}, [][2]int{{3, 2}})
	want := []Test{{"pp7", "pp", 7, 0, 0}, {"tg5", "tg", 0, 5, 0}, {"pp3+tg2", "pp+tg", 3, 2, 0}}
	if !reflect.DeepEqual(ts, want) {
		t.Fatalf("tests = %+v, want %+v", ts, want)
	}
	for i, c := range []struct{ prompt, requested int }{{7, 1}, {1, 6}, {3, 3}} {
		if ts[i].PromptTokens() != c.prompt || ts[i].RequestedOutputTokens() != c.requested {
			t.Errorf("%s: prompt %d requested %d, want %d %d", ts[i].Label, ts[i].PromptTokens(), ts[i].RequestedOutputTokens(), c.prompt, c.requested)
		}
	}
}

func TestRequiredContext(t *testing.T) {
	seed := ExpandTests(nil, []int{256, 1024}, [][2]int{{2048, 512}, {8192, 512}})
	cases := []struct {
		name  string
		tests []Test
		spec  string
		k     int
		graph bool
		want  ContextNeed
	}{
		{"pp", ExpandTests([]int{512}, nil, nil), SpecNone, 0, true, ContextNeed{"pp512", 512}},
		{"pp mtp margin", ExpandTests([]int{512}, nil, nil), SpecMTP, 5, false, ContextNeed{"pp512", 522}},
		{"tg seeds one token", ExpandTests(nil, []int{128}, nil), SpecNone, 0, false, ContextNeed{"tg128", 129}},
		{"pp+tg", ExpandTests(nil, nil, [][2]int{{16, 8}}), SpecNone, 0, false, ContextNeed{"pp16+tg8", 24}},
		{"seed report", seed, SpecMTP, 2, true, ContextNeed{"pp8192+tg512", 8708}},
		{"first maximum wins", ExpandTests([]int{9}, []int{8}, nil), SpecNone, 0, false, ContextNeed{"pp9", 9}},
		{"graph prime", ExpandTests(nil, []int{1}, nil), SpecNone, 0, true, ContextNeed{"decode graph prime", 3}},
		{"graph prime mtp", ExpandTests(nil, []int{1}, nil), SpecMTP, 2, true, ContextNeed{"decode graph prime", 11}},
		{"no prime without graph", ExpandTests(nil, []int{1}, nil), SpecNone, 0, false, ContextNeed{"tg1", 2}},
		{"no prime without decode", ExpandTests([]int{1}, nil, nil), SpecNone, 0, true, ContextNeed{"pp1", 1}},
	}
	for _, c := range cases {
		if got := RequiredContext(c.tests, c.spec, c.k, c.graph); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	if PrimeOutputs(SpecNone, 0) != 3 || PrimeOutputs(SpecMTP, 2) != 7 {
		t.Errorf("PrimeOutputs = %d, %d; want 3, 7", PrimeOutputs(SpecNone, 0), PrimeOutputs(SpecMTP, 2))
	}
}

func TestResolveMaxContext(t *testing.T) {
	need := ContextNeed{"pp16+tg8", 24}
	for _, c := range []struct {
		override, want int
		wantErr        string
	}{
		{0, 24, ""},
		{24, 24, ""},
		{16384, 16384, ""},
		{23, 0, "--max-ctx 23 is too small; pp16+tg8 needs 24"},
	} {
		got, err := ResolveMaxContext(c.override, need)
		checkParse(t, fmt.Sprintf("ResolveMaxContext(%d)", c.override), got, err, c.want, c.wantErr)
	}
	_, err := ResolveMaxContext(2, ContextNeed{"decode graph prime", 3})
	if err == nil || err.Error() != "--max-ctx 2 is too small; decode graph prime needs 3" {
		t.Errorf("prime message: %v", err)
	}
}

func TestCheckModelContext(t *testing.T) {
	need := ContextNeed{"tg100000", 100001}
	for _, c := range []struct {
		maxCtx, override, maxPos int
		wantErr                  string
	}{
		{4096, 0, 4096, ""},
		{4096, 4096, 4096, ""},
		{100001, 0, 0, ""}, // no max_position_embeddings: no limit
		{100001, 0, 4096, "tg100000 needs 100001 tokens of context, above the model's max_position_embeddings 4096"},
		{100000000, 100000000, 4096, "--max-ctx 100000000 exceeds the model's max_position_embeddings 4096"},
	} {
		err := CheckModelContext(c.maxCtx, c.override, need, c.maxPos)
		if got := fmt.Sprint(err); (c.wantErr == "" && err != nil) || (c.wantErr != "" && got != c.wantErr) {
			t.Errorf("CheckModelContext(%d, %d, %d) = %v, want %q", c.maxCtx, c.override, c.maxPos, err, c.wantErr)
		}
	}
}

func TestCheckCorpus(t *testing.T) {
	tests := ExpandTests([]int{8}, []int{100}, [][2]int{{16, 4}})
	if err := CheckCorpus(tests, 16); err != nil {
		t.Errorf("corpus of 16: %v", err)
	}
	if err := CheckCorpus(tests, 15); err == nil || err.Error() != "pp16+tg4 exceeds the token-id corpus" {
		t.Errorf("corpus of 15: %v", err)
	}
	if err := CheckCorpus(ExpandTests(nil, []int{4}, nil), 0); err == nil || err.Error() != "corpus is too small to seed decode tests" {
		t.Errorf("empty corpus: %v", err)
	}
	if err := CheckCorpus(ExpandTests(nil, []int{4096}, nil), 1); err != nil {
		t.Errorf("tg needs one seed token only: %v", err)
	}
}

func TestDecodePath(t *testing.T) {
	for _, c := range []struct {
		spec  string
		graph bool
		want  string
	}{{SpecNone, false, "eager"}, {SpecNone, true, "cuda_graph"}, {SpecMTP, true, "mtp_cuda_graph"}, {SpecMTP, false, "mtp_eager"}, {"", false, "eager"}} {
		if got := DecodePath(c.spec, c.graph); got != c.want {
			t.Errorf("DecodePath(%q, %v) = %q, want %q", c.spec, c.graph, got, c.want)
		}
	}
}

func TestProgressLine(t *testing.T) {
	if got, want := ProgressLine(0, 3, "pp16", 0, 2, true, nil), "[1/3] pp16 warmup 1/2  - tok/s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := ProgressLine(2, 3, "tg8", 1, 5, false, []float64{100, 300}), "[3/3] tg8 rep 2/5  200.0 tok/s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
