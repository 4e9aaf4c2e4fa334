package report

import (
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/internal/numtest"
	"github.com/ninfer/ninfer/pkg/benchfmt"
)

func TestCheckSeedPasses(t *testing.T) {
	doc := seedDoc(t)
	res := Check(&doc)
	if len(res.Mismatches) != 0 {
		t.Fatalf("seed fails Check: %v", res.Mismatches)
	}
	// 4 tests × (2 + 14 + 10) + 12 reps × (3 + 10 + 1) values.
	if res.Checked != 4*26+12*14 || res.Rounding != 4 || res.Exact != res.Checked-4 {
		t.Errorf("checked %d, exact %d, rounding %d", res.Checked, res.Exact, res.Rounding)
	}
}

// Each tampering of the seed text must produce exactly the named mismatch.
func TestCheckDetectsTampering(t *testing.T) {
	seed := string(seedBytes(t))
	cases := []struct {
		name, from, to string
		path           string
	}{
		{"mean last digits", `"decode_seconds_mean": 4.713756661`, `"decode_seconds_mean": 4.713756761`, "tests[0].decode_seconds_mean"},
		{"stddev", `"prefill_tok_s_stddev": 3.395740868`, `"prefill_tok_s_stddev": 3.395745868`, "tests[2].prefill_tok_s_stddev"},
		{"population stddev", `"total_seconds_stddev": 0.00301945519`, `"total_seconds_stddev": 0.002465377`, "tests[0].total_seconds_stddev"},
		{"null expected", `"prefill_tok_s_mean": null, "prefill_tok_s_stddev": null, "decode_output_tok_s_mean": 54.30914011`,
			`"prefill_tok_s_mean": 1, "prefill_tok_s_stddev": null, "decode_output_tok_s_mean": 54.30914011`, "tests[0].prefill_tok_s_mean"},
		{"value expected", `"decode_seconds_mean": 6.529371988`, `"decode_seconds_mean": null`, "tests[3].decode_seconds_mean"},
		{"spec rounds", `"rounds": 381`, `"rounds": 380`, "tests[0].speculative.rounds"},
		{"spec per position", `[1005, 819]`, `[1005, 818]`, "tests[1].speculative.accepted_per_position"},
		{"spec rate", `"acceptance_rate": 0.9463276836, "acceptance_length": 2.892655367, "accepted_per_position": [513, 492]`,
			`"acceptance_rate": 0.9463276838, "acceptance_length": 2.892655367, "accepted_per_position": [513, 492]`, "tests[2].speculative.acceptance_rate"},
		{"engine tokens", `"decode_engine_tokens": 256, "timings": {"prepare_seconds": 1.36e-06`, `"decode_engine_tokens": 255, "timings": {"prepare_seconds": 1.36e-06`,
			"tests[0].reps[1].decode_engine_tokens"},
		{"requested", `"requested_output_tokens": 1025`, `"requested_output_tokens": 1024`, "tests[1].requested_output_tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := strings.Replace(seed, c.from, c.to, 1)
			if in == seed {
				t.Fatalf("replacement not applied")
			}
			doc, err := benchfmt.DecodeDocument([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			res := Check(&doc)
			var paths []string
			for _, m := range res.Mismatches {
				paths = append(paths, m.Path)
			}
			found := false
			for _, p := range paths {
				found = found || p == c.path
			}
			if !found {
				t.Errorf("mismatches %v, want %s", paths, c.path)
			}
		})
	}
}

func TestRenderCSV(t *testing.T) {
	doc := seedDoc(t)
	out, err := RenderCSV([]Run{{RunID: "seed", Document: doc}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	tg := recs[1]
	if tg[col["label"]] != "tg256" || tg[col["prefill_tok_s_mean"]] != "" || tg[col["decode_output_tok_s_mean"]] != "54.30914011" ||
		tg[col["prepare_seconds_mean"]] != "1.323333333e-06" || tg[col["rounds"]] != "381" || tg[col["reps"]] != "3" {
		t.Errorf("tg256 row = %v", tg)
	}
}

func TestRenderMarkdown(t *testing.T) {
	doc := seedDoc(t)
	md := string(RenderMarkdown([]Run{{RunID: "seed", Document: doc}}))
	lines := strings.Split(strings.TrimSpace(md), "\n")
	if len(lines) != 2+6 {
		t.Fatalf("%d lines:\n%s", len(lines), md)
	}
	for _, want := range []string{"| model ", "| mtp k=2 optimized-head |", " tg256 |   54.31 ± 0.04 | 50.8% len 2.02 |",
		" pp2048+tg512 (pp) | 3609.88 ± 3.40 |              - |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestCompare(t *testing.T) {
	rng := numtest.Seeded(t)
	a := seedDoc(t)
	b := seedDoc(t)
	// B: tg256 decode 10% faster (clearly significant), pp2048+tg512
	// prefill within noise, tg1024 dropped, an extra test added.
	for i := range b.Tests[0].Reps {
		b.Tests[0].Reps[i].Timings.DecodeSeconds /= 1.10
	}
	for i := range b.Tests[2].Reps {
		b.Tests[2].Reps[i].Timings.PrefillSeconds *= 1 + 1e-4*rng.NormFloat64()
	}
	b.Tests = append(b.Tests[:1], b.Tests[2:]...)
	extra := b.Tests[0]
	extra.Label = "tg8"
	b.Tests = append(b.Tests, extra)
	b.Config.KVCache = "bf16"
	c := Compare(&a, &b)
	rows := map[string]CompareRow{}
	for _, r := range c.Rows {
		rows[r.Test+" "+r.Metric.String()] = r
	}
	tg := rows["tg256 decode_output_tok_s"]
	if !tg.Significant || tg.deltaText() != "+10.00%" || len(tg.A) != 3 || len(tg.B) != 3 {
		t.Errorf("tg256 row = %+v (%s)", tg, tg.deltaText())
	}
	pp := rows["pp2048+tg512 prefill_tok_s"]
	if pp.Significant || pp.deltaText() != "~" {
		t.Errorf("pp2048 prefill row = %+v", pp)
	}
	if _, ok := rows["tg1024 decode_output_tok_s"]; ok {
		t.Error("tg1024 compared although only in A")
	}
	w := strings.Join(c.Warnings, "\n")
	for _, s := range []string{"config.kv_cache differs: fp8-e4m3-row256 vs bf16", "test tg1024 only in A", "test tg8 only in B"} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings lack %q:\n%s", s, w)
		}
	}
	md, err := RenderCompare(FormatMD, c, "a", "b")
	if err != nil || !strings.Contains(string(md), "| tg256 ") || !strings.Contains(string(md), "+10.00% | p=") {
		t.Errorf("compare md:\n%s", md)
	}
	out, err := RenderCompare(FormatCSV, c, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) != 1+len(c.Rows) || recs[1][0] != "tg256" || recs[1][10] != "true" {
		t.Errorf("compare csv %v %v", err, recs)
	}
	if _, err := RenderCompare("json", c, "a", "b"); err == nil {
		t.Error("unknown compare format accepted")
	}
}

// BenchmarkAggregate100k parses and aggregates 100,000 rep lines (plus run
// and test_end lines) from text, the ninfer-report hot path.
func BenchmarkAggregate100k(b *testing.B) {
	seed := seedDoc(b)
	run := benchfmt.AppendRunLine(nil, &benchfmt.RunLine{RunID: "big", SchemaVersion: 15, Command: seed.Command,
		Environment: seed.Environment, Artifact: seed.Artifact, Load: seed.Load, Memory: seed.Memory, Config: seed.Config})
	text := append([]byte{}, run...)
	rng := rand.New(rand.NewPCG(1, 1))
	const tests, reps = 100, 1000
	for ti := 0; ti < tests; ti++ {
		src := seed.Tests[ti%len(seed.Tests)]
		for ri := 0; ri < reps; ri++ {
			r := src.Reps[ri%len(src.Reps)]
			r.Timings.DecodeSeconds *= 1 + 0.01*rng.Float64()
			text = benchfmt.AppendRepLine(text, &benchfmt.RepLine{RunID: "big", TestIndex: int64(ti), Label: src.Label, Kind: src.Kind,
				NPrompt: src.NPrompt, NGen: src.NGen, RequestedOutputTokens: src.RequestedOutputTokens, RepIndex: int64(ri), Rep: r})
		}
		text = benchfmt.AppendTestEndLine(text, &benchfmt.TestEndLine{RunID: "big", TestIndex: int64(ti), Label: src.Label})
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() {
		b.ReportMetric((processCPU()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	}()
	for i := 0; i < b.N; i++ {
		c := NewCollector()
		if _, err := addLines(c, "big.jsonl", text); err != nil {
			b.Fatal(err)
		}
		runs, err := c.Runs()
		if err != nil || len(runs[0].Document.Tests) != tests {
			b.Fatal(err, fmt.Sprint(len(runs)))
		}
	}
}

// TestBackendCell: the markdown table names the CPU level a run recorded
// (environment.isa) next to its backend, and the backend alone without one.
func TestBackendCell(t *testing.T) {
	cpuName := "cpu"
	for _, c := range []struct {
		name  string
		extra []benchfmt.RawField
		want  string
	}{
		{"isa recorded", []benchfmt.RawField{{Key: "activations", JSON: `"auto"`}, {Key: "isa", JSON: `"avx2"`}}, "cpu/avx2"},
		{"no isa", nil, "cpu"},
		{"empty isa", []benchfmt.RawField{{Key: "isa", JSON: `""`}}, "cpu"},
		{"not a string", []benchfmt.RawField{{Key: "isa", JSON: `3`}}, "cpu"},
	} {
		d := benchfmt.Document{Environment: benchfmt.Environment{Backend: &cpuName, Extra: c.extra}}
		if got := backendCell(&d); got != c.want {
			t.Errorf("%s: backendCell = %q, want %q", c.name, got, c.want)
		}
	}
}
