package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/internal/testfixture"
	"github.com/ninfer/ninfer/pkg/chat"
	"github.com/ninfer/ninfer/pkg/engine"
	"github.com/ninfer/ninfer/pkg/loader"
	"github.com/ninfer/ninfer/pkg/sample"
)

func TestMain(m *testing.M) { testfixture.Main(m) }

func artifact(t *testing.T, recipe string) string {
	t.Helper()
	return testfixture.Artifact(t, recipe, nil)
}

// seeded returns a fresh RNG; its seed is logged so a failure can be
// replayed (NINFER_TEST_SEED).
var seeded = numtest.Seeded

func openRunner(t *testing.T, recipe string, mut func(*Options)) *Runner {
	t.Helper()
	o := Options{Weights: artifact(t, recipe), Backend: "cpu", Threads: 2, MaxNew: 12, MaxContext: 512, PrefillChunk: 128, KVDtype: "fp32"}
	if mut != nil {
		mut(&o)
	}
	r, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// randIDs returns n uniform token ids in [0, vocab).
var randIDs = numtest.RandIDs

// manualGreedy is the reference loop: engine Prefill, then argmax/Decode.
func manualGreedy(t *testing.T, path string, prompt []int32, n int) []int32 {
	t.Helper()
	w, err := loader.OpenWeights(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	be, _, _, err := loader.NewBackend("cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	eng, err := engine.New(w, be, engine.Options{MaxContext: 512, PrefillChunk: 128, KVDtype: "fp32"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	seq, err := eng.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	logits, err := seq.Prefill(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for len(out) < n {
		id := sample.Argmax(logits)
		out = append(out, id)
		if logits, err = seq.Decode(id); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestGreedyMatchesManualLoop(t *testing.T) {
	rng := seeded(t)
	for _, tc := range []struct {
		recipe string
		prompt int // random prompt length; > 128 spans prefill chunks
	}{
		{"fp32", 5},
		{"fp32", 200},
		{"q8", 37},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.recipe, tc.prompt), func(t *testing.T) {
			r := openRunner(t, tc.recipe, func(o *Options) { o.IgnoreEOS = true })
			prompt := randIDs(rng, tc.prompt, r.VocabSize())
			res, err := r.Run(context.Background(), Input{IDs: prompt}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := manualGreedy(t, artifact(t, tc.recipe), prompt, 12)
			if !slices.Equal(res.IDs, want) {
				t.Fatalf("runner ids %v, manual loop %v", res.IDs, want)
			}
			if res.FinishReason != FinishLength {
				t.Errorf("finish %q, want length", res.FinishReason)
			}
			again, err := r.Run(context.Background(), Input{IDs: prompt}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again.IDs, res.IDs) {
				t.Fatalf("second run %v differs from first %v", again.IDs, res.IDs)
			}
		})
	}
}

func TestFreshSequencePerPrompt(t *testing.T) {
	rng := seeded(t)
	r := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS = true; o.MaxNew = 6 })
	a, b := randIDs(rng, 9, r.VocabSize()), randIDs(rng, 14, r.VocabSize())
	var got [][]int32
	for _, p := range [][]int32{a, b, a} {
		res, err := r.Run(context.Background(), Input{IDs: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.IDs)
	}
	if !slices.Equal(got[0], got[2]) {
		t.Fatalf("prompt A after B gave %v, first time %v: state leaked between prompts", got[2], got[0])
	}
}

func TestTextAndIDsAgree(t *testing.T) {
	r := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS = true })
	tok := r.Tokenizer()
	if tok == nil {
		t.Fatal("the test artifact has no tokenizer")
	}
	var streamed bytes.Buffer
	text := "The quick brown fox"
	res, err := r.Run(context.Background(), Input{Text: text}, TextSink{&streamed})
	if err != nil {
		t.Fatal(err)
	}
	if want := tok.Encode(text, true); !slices.Equal(res.PromptIDs, want) {
		t.Fatalf("prompt ids %v, want %v", res.PromptIDs, want)
	}
	if want := tok.Decode(res.IDs, false); res.Text != want {
		t.Fatalf("text %q, want Decode(ids) %q", res.Text, want)
	}
	if streamed.String() != res.Text+"\n" {
		t.Fatalf("streamed %q, want %q", streamed.String(), res.Text+"\n")
	}
	if res.Prompt != text {
		t.Errorf("prompt %q, want %q", res.Prompt, text)
	}

	// The same prompt as ids, through the line reader and the id sink.
	line := FormatIDs(res.PromptIDs)
	lr := NewLineReader(strings.NewReader("\n"+line+"\n"), "stdin", true)
	in, err := lr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if in.Source != "stdin: line 2" {
		t.Errorf("source %q, want stdin: line 2", in.Source)
	}
	var out bytes.Buffer
	ires, err := r.Run(context.Background(), in, &IDSink{W: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ires.IDs, res.IDs) {
		t.Fatalf("ids prompt generated %v, text prompt %v", ires.IDs, res.IDs)
	}
	back, err := ParseIDs(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, res.IDs) || !strings.HasSuffix(out.String(), "\n") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("id sink wrote %q, want the line %q", out.String(), FormatIDs(res.IDs))
	}
	if _, err := lr.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want EOF", err)
	}
}

func TestIDErrorsNamePosition(t *testing.T) {
	r := openRunner(t, "fp32", nil)
	v := r.VocabSize()
	for _, tc := range []struct {
		input string
		want  []string // substrings of the error, from Next or PromptIDs
	}{
		{fmt.Sprintf("1 2\n\n5 6 %d\n", v), []string{"stdin: line 3: token 3: id " + fmt.Sprint(v), "outside the vocabulary"}},
		{"7 8\n1 x 3\n", []string{"stdin: line 2: token 2", `"x"`}},
		{"4 -1\n", []string{"stdin: line 1: token 2"}},
		{"99999999999\n", []string{"stdin: line 1: token 1"}},
	} {
		t.Run(tc.input, func(t *testing.T) {
			lr := NewLineReader(strings.NewReader(tc.input), "stdin", true)
			var err error
			for err == nil {
				var in Input
				if in, err = lr.Next(); err == nil {
					_, err = r.PromptIDs(in)
				}
			}
			if err == io.EOF {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestSeededSampling(t *testing.T) {
	sc := sample.Config{Temperature: 1, TopK: 100, TopP: 0.95, Seed: 7}
	run := func(seed uint64) []int32 {
		r := openRunner(t, "fp32", func(o *Options) {
			o.IgnoreEOS, o.MaxNew, o.Sampling = true, 16, sc
			o.Sampling.Seed = seed
		})
		res, err := r.Run(context.Background(), Input{Text: "once upon a time"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.IDs
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed gave %v and %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 7 and 8 both gave %v", a)
	}
	greedy := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS, o.MaxNew = true, 16 })
	g, err := greedy.Run(context.Background(), Input{Text: "once upon a time"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a, g.IDs) {
		t.Fatalf("temperature 1 sampling equals greedy %v", a)
	}
}

func TestEOSStop(t *testing.T) {
	rng := seeded(t)
	free := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS = true })
	prompt := randIDs(rng, 10, free.VocabSize())
	res, err := free.Run(context.Background(), Input{IDs: prompt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := res.IDs
	k := -1 // first position ≥ 1 whose id did not occur before
	for i := 1; i < len(ids) && k < 0; i++ {
		if !slices.Contains(ids[:i], ids[i]) {
			k = i
		}
	}
	if k < 0 {
		t.Skipf("greedy output %v repeats one id; no distinct stop id", ids)
	}
	stop := ids[k]
	for _, tc := range []struct {
		name   string
		ignore bool
		want   []int32
		finish string
	}{
		{"stop", false, ids[:k+1], FinishEOS},
		{"ignore-eos", true, ids, FinishLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := openRunner(t, "fp32", func(o *Options) { o.EOSIDs = []int32{stop}; o.IgnoreEOS = tc.ignore })
			var out bytes.Buffer
			got, err := r.Run(context.Background(), Input{IDs: prompt}, TextSink{&out})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.IDs, tc.want) || got.FinishReason != tc.finish {
				t.Fatalf("ids %v finish %q, want %v %q", got.IDs, got.FinishReason, tc.want, tc.finish)
			}
			wantText := r.Tokenizer().Decode(tc.want, false)
			if tc.finish == FinishEOS {
				wantText = r.Tokenizer().Decode(tc.want[:len(tc.want)-1], false) // EOS is not rendered
			}
			if got.Text != wantText || out.String() != wantText+"\n" {
				t.Fatalf("text %q streamed %q, want %q", got.Text, out.String(), wantText)
			}
		})
	}
}

func TestDefaultEOSFromGenerationConfig(t *testing.T) {
	r := openRunner(t, "fp32", nil)
	tok := r.Tokenizer()
	for _, name := range []string{"<|im_end|>", "<|endoftext|>"} {
		id, ok := tok.TokenID(name)
		if !ok {
			t.Fatalf("tokenizer lacks %s", name)
		}
		if !r.IsEOS(id) {
			t.Errorf("%s (%d) is not an EOS id", name, id)
		}
	}
	if r.IsEOS(5) {
		t.Error("byte token 5 is an EOS id")
	}
}

func TestMaxNewAndContextLimit(t *testing.T) {
	rng := seeded(t)
	for _, tc := range []struct {
		maxNew, prompt, maxCtx int
		wantErr                bool
	}{
		{0, 7, 512, false},
		{1, 7, 512, false},
		{5, 7, 512, false},
		{20, 12, 32, false},
		{21, 12, 32, true},
		{1, 300, 256, true},
	} {
		t.Run(fmt.Sprintf("new%d/prompt%d/ctx%d", tc.maxNew, tc.prompt, tc.maxCtx), func(t *testing.T) {
			r := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS, o.MaxNew, o.MaxContext = true, tc.maxNew, tc.maxCtx })
			res, err := r.Run(context.Background(), Input{IDs: randIDs(rng, tc.prompt, r.VocabSize())}, nil)
			if tc.wantErr {
				if !errors.Is(err, ErrContextLimit) {
					t.Fatalf("error %v, want a context limit error", err)
				}
				for _, w := range []string{fmt.Sprintf("%d tokens", tc.prompt), fmt.Sprintf("--max-new %d", tc.maxNew), fmt.Sprintf("--max-ctx %d", tc.maxCtx)} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.IDs) != tc.maxNew || res.FinishReason != FinishLength || res.Timings.GeneratedTokens != tc.maxNew {
				t.Fatalf("%d ids (timings %d), finish %q; want %d, length", len(res.IDs), res.Timings.GeneratedTokens, res.FinishReason, tc.maxNew)
			}
		})
	}
}

func TestJSONLine(t *testing.T) {
	r := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS, o.MaxNew = true, 8 })
	var out bytes.Buffer
	res, err := r.Run(context.Background(), Input{Text: "a <b> & c"}, JSONSink{&out})
	if err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || !gjson.Valid(line) {
		t.Fatalf("not one JSON line: %q", line)
	}
	j := gjson.Parse(line)
	if !strings.Contains(line, `"prompt":"a <b> & c"`) {
		t.Errorf("prompt not written verbatim (HTML-escaped?): %s", line)
	}
	if got := j.Get("prompt").String(); got != "a <b> & c" {
		t.Errorf("prompt %q", got)
	}
	if got := j.Get("text").String(); got != res.Text {
		t.Errorf("text %q, want %q", got, res.Text)
	}
	if got := j.Get("finish_reason").String(); got != "length" {
		t.Errorf("finish_reason %q", got)
	}
	var ids []int32
	for _, v := range j.Get("ids").Array() {
		ids = append(ids, int32(v.Int()))
	}
	if !slices.Equal(ids, res.IDs) || len(ids) != 8 {
		t.Errorf("ids %v, want %v", ids, res.IDs)
	}
	if n := len(j.Get("prompt_ids").Array()); n != len(res.PromptIDs) || n == 0 {
		t.Errorf("%d prompt_ids, want %d", n, len(res.PromptIDs))
	}
	tm := j.Get("timings")
	if tm.Get("prompt_tokens").Int() != int64(len(res.PromptIDs)) || tm.Get("generated_tokens").Int() != 8 {
		t.Errorf("token counts %s", tm.Raw)
	}
	for _, k := range []string{"prefill_s", "decode_s", "prefill_tok_s", "decode_tok_s"} {
		if v := tm.Get(k); !v.Exists() || !(v.Float() > 0) {
			t.Errorf("timings.%s = %s, want > 0", k, v.Raw)
		}
	}
	// tok/s are consistent with the seconds.
	if got, want := tm.Get("decode_tok_s").Float(), 7/tm.Get("decode_s").Float(); abs(got-want) > 1e-6*want {
		t.Errorf("decode_tok_s %v, want 7/decode_s = %v", got, want)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestChatPrompt(t *testing.T) {
	for _, tc := range []struct {
		system  string
		noThink bool
		want    string
	}{
		{"", false, "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"},
		{"Be brief.", true, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	} {
		t.Run(fmt.Sprintf("system=%q/nothink=%v", tc.system, tc.noThink), func(t *testing.T) {
			r := openRunner(t, "fp32", func(o *Options) { o.Chat, o.System, o.NoThink, o.MaxNew = true, tc.system, tc.noThink, 2 })
			text, err := r.PromptText("hi there")
			if err != nil {
				t.Fatal(err)
			}
			if text != tc.want {
				t.Fatalf("rendered %q, want %q", text, tc.want)
			}
			var msgs []chat.Message
			if tc.system != "" {
				msgs = append(msgs, chat.Message{Role: "system", Content: tc.system})
			}
			msgs = append(msgs, chat.Message{Role: "user", Content: "hi there"})
			ref, _ := chat.Render(msgs, chat.Options{AddGenerationPrompt: true, DisableThinking: tc.noThink})
			res, err := r.Run(context.Background(), Input{Text: "hi there"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := r.Tokenizer().Encode(ref, true)
			if !slices.Equal(res.PromptIDs, want) {
				t.Fatalf("prompt ids %v, want %v", res.PromptIDs, want)
			}
			start, _ := r.Tokenizer().TokenID("<|im_start|>")
			if res.PromptIDs[0] != start {
				t.Fatalf("first prompt id %d, want <|im_start|> %d", res.PromptIDs[0], start)
			}
			if res.Prompt != "hi there" {
				t.Errorf("result prompt %q, want the user text", res.Prompt)
			}
		})
	}
}

// cancelSink cancels the context after n tokens.
type cancelSink struct {
	n, seen int
	cancel  context.CancelFunc
	text    bytes.Buffer
	ended   int
}

func (s *cancelSink) Token(_ int32, text string) error {
	s.text.WriteString(text)
	if s.seen++; s.seen == s.n {
		s.cancel()
	}
	return nil
}

func (s *cancelSink) End(tail string, _ *Result) error {
	s.text.WriteString(tail)
	s.ended++
	return nil
}

func TestInterrupt(t *testing.T) {
	r := openRunner(t, "fp32", func(o *Options) { o.IgnoreEOS, o.MaxNew = true, 50 })
	for _, n := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := &cancelSink{n: n, cancel: cancel}
			if n == 0 {
				cancel()
			}
			res, err := r.Run(ctx, Input{Text: "interrupt me"}, s)
			if err != nil {
				t.Fatal(err)
			}
			if res.FinishReason != FinishInterrupted || len(res.IDs) != n || s.ended != 1 {
				t.Fatalf("finish %q with %d ids, End called %d times; want interrupted, %d, 1", res.FinishReason, len(res.IDs), s.ended, n)
			}
			if s.text.String() != res.Text {
				t.Fatalf("sink saw %q, result text %q", s.text.String(), res.Text)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	path := artifact(t, "fp32")
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"spec", Options{Weights: path, Spec: "eagle"}, `--spec "eagle"`},
		{"draft tokens", Options{Weights: path, Spec: "mtp", DraftTokens: 6}, "--draft-tokens 6"},
		{"lm-head-draft without spec", Options{Weights: path, LMHeadDraft: true}, "--lm-head-draft needs --spec mtp"},
		{"no proposal head", Options{Weights: path, Spec: "mtp", LMHeadDraft: true}, "proposal head"},
		{"chunk", Options{Weights: path, PrefillChunk: 100}, "--prefill-chunk 100"},
		{"missing", Options{Weights: path + ".missing"}, ".missing"},
		{"kv", Options{Weights: path, KVDtype: "int4"}, "int4"},
		{"sampling", Options{Weights: path, Sampling: sample.Config{TopP: 2}}, "top_p"},
		{"backend", Options{Weights: path, Backend: "tpu"}, "tpu"},
		// Refused before the engine allocates a KV cache for it.
		{"max-ctx over the model", Options{Weights: path, MaxContext: 4097}, "--max-ctx 4097 exceeds the model's max_position_embeddings 4096"},
		{"max-ctx huge", Options{Weights: path, MaxContext: 100_000_000}, "--max-ctx 100000000 exceeds the model's max_position_embeddings 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open(tc.o)
			if err == nil {
				r.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

func TestWholeText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a b\n", "a b"},
		{"a\r\nb\r\n", "a\r\nb"},
		{"line1\nline2\n\n", "line1\nline2\n"},
		{"x", "x"},
	} {
		if got := WholeText([]byte(tc.in), "f").Text; got != tc.want {
			t.Errorf("WholeText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSpeculative(t *testing.T) {
	rng := seeded(t)
	plain := openRunner(t, "q8", func(o *Options) { o.IgnoreEOS, o.MaxNew = true, 24 })
	prompt := randIDs(rng, 150, plain.VocabSize()) // spans two 128-token prefill chunks
	want, err := plain.Run(context.Background(), Input{IDs: prompt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("greedy/k=%d", k), func(t *testing.T) {
			r := openRunner(t, "q8", func(o *Options) { o.IgnoreEOS, o.MaxNew, o.Spec, o.DraftTokens = true, 24, "mtp", k })
			var out bytes.Buffer
			got, err := r.Run(context.Background(), Input{IDs: prompt}, TextSink{&out})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.IDs, want.IDs) || got.FinishReason != FinishLength {
				t.Fatalf("speculative ids %v (%s), plain greedy %v", got.IDs, got.FinishReason, want.IDs)
			}
			if out.String() != want.Text+"\n" || got.Text != want.Text {
				t.Fatalf("streamed %q, text %q, want %q", out.String(), got.Text, want.Text)
			}
			st := got.Spec
			if st == nil || st.Backend != "mtp" || st.DraftTokens != k || st.Rounds == 0 ||
				st.Rounds+st.AcceptedTokens+st.FallbackSteps != len(got.IDs)-1 || st.AcceptedTokens > st.DraftedTokens {
				t.Fatalf("spec stats %+v for %d tokens", st, len(got.IDs))
			}
			if got.Timings.PrefillSeconds <= 0 || got.Timings.DecodeTokPerS <= 0 {
				t.Errorf("timings %+v", got.Timings)
			}
		})
	}
	t.Run("eos", func(t *testing.T) {
		k := -1
		for i := 1; i < len(want.IDs) && k < 0; i++ {
			if !slices.Contains(want.IDs[:i], want.IDs[i]) {
				k = i
			}
		}
		if k < 0 {
			t.Skipf("greedy output %v repeats one id", want.IDs)
		}
		r := openRunner(t, "q8", func(o *Options) { o.MaxNew, o.Spec, o.EOSIDs = 24, "mtp", []int32{want.IDs[k]} })
		got, err := r.Run(context.Background(), Input{IDs: prompt}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.IDs, want.IDs[:k+1]) || got.FinishReason != FinishEOS {
			t.Fatalf("ids %v finish %q, want %v eos", got.IDs, got.FinishReason, want.IDs[:k+1])
		}
	})
	t.Run("sampling", func(t *testing.T) {
		run := func(seed uint64) []int32 {
			r := openRunner(t, "q8", func(o *Options) {
				o.IgnoreEOS, o.MaxNew, o.Spec, o.DraftTokens = true, 16, "mtp", 2
				o.Sampling = sample.Config{Temperature: 1, Seed: seed}
			})
			res, err := r.Run(context.Background(), Input{IDs: prompt[:20]}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.IDs) != 16 {
				t.Fatalf("%d ids, want 16", len(res.IDs))
			}
			return res.IDs
		}
		a, b, c := run(3), run(3), run(4)
		if !slices.Equal(a, b) || slices.Equal(a, c) {
			t.Fatalf("seed 3: %v, %v; seed 4: %v", a, b, c)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		r := openRunner(t, "q8", func(o *Options) { o.IgnoreEOS, o.MaxNew, o.Spec, o.DraftTokens = true, 40, "mtp", 3 })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &cancelSink{n: 4, cancel: cancel}
		res, err := r.Run(ctx, Input{IDs: prompt[:10]}, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.FinishReason != FinishInterrupted || len(res.IDs) != 4 || s.ended != 1 || s.text.String() != res.Text {
			t.Fatalf("finish %q, %d ids, End %d times, sink text %q vs %q", res.FinishReason, len(res.IDs), s.ended, s.text.String(), res.Text)
		}
	})
}

func TestSinksFlushPerToken(t *testing.T) {
	var dst bytes.Buffer
	w := bufio.NewWriter(&dst)
	for _, tc := range []struct {
		sink Sink
		want string // dst after Token(42, "héllo")
	}{
		{TextSink{w}, "héllo"},
		{&IDSink{W: w}, "42"},
		{JSONSink{w}, ""},
	} {
		dst.Reset()
		if err := tc.sink.Token(42, "héllo"); err != nil {
			t.Fatal(err)
		}
		if dst.String() != tc.want {
			t.Errorf("%T: after one token the writer holds %q, want %q (not flushed?)", tc.sink, dst.String(), tc.want)
		}
		if err := tc.sink.End("!", &Result{IDs: []int32{42}, FinishReason: FinishLength}); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(dst.String(), "\n") || strings.Count(dst.String(), "\n") != 1 {
			t.Errorf("%T: output %q is not one terminated line", tc.sink, dst.String())
		}
	}
}
