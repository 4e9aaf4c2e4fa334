package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/ninfer/ninfer/pkg/bench"
	"github.com/ninfer/ninfer/pkg/benchfmt"
	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/plan"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// TestBenchMemoryEqualsPlan is the end-to-end "plan = reality" check:
// ninfer-bench's memory object (built from the engine's run) equals
// `ninfer-plan --weights M --backend cpu --available A --max-ctx C
// --kv-capacity C --kv-dtype D --prefill-chunk N --json` for the same
// options, byte for byte, also with --spec mtp --draft-tokens K (the MTP
// head's arenas are part of the plan) and --lm-head-draft on an artifact
// with a proposal head. The fake environment reports A after the weights
// and A − the planned reservation after startup, as a real host would.
func TestBenchMemoryEqualsPlan(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hf")
	if _, err := testmodel.WriteDir(src, testmodel.DefaultOptions(), false); err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Lookup("q8")
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "tiny.ninfer")
	if _, err := convert.Convert(context.Background(), src, model, convert.Options{Recipe: r, Workers: 2}); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, 100) // a 100-row proposal head
	for i := range ids {
		ids[i] = int32(i*5 + 1)
	}
	draftModel := filepath.Join(dir, "tiny-draft.ninfer")
	if _, err := convert.Convert(context.Background(), src, draftModel, convert.Options{Recipe: r, Workers: 2,
		Draft: &convert.DraftHead{TokenIDs: ids}}); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "corpus.ids")
	var b strings.Builder
	for i := 0; i < 64; i++ {
		fmt.Fprintf(&b, "%d ", (i*37+5)%500)
	}
	if err := os.WriteFile(corpus, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const A = int64(3) << 30
	for _, tc := range []struct {
		kv         string
		chunk, ctx int
		k          int  // --spec mtp --draft-tokens k when > 0
		proposal   bool // --lm-head-draft on the draft-head artifact
	}{{"bf16", 1024, 24, 0, false}, {"int8", 128, 200, 0, false}, {"fp8", 128, 1000, 0, false}, {"bf16", 256, 4096, 0, false},
		{"int8", 128, 200, 2, false}, {"fp8", 256, 1000, 2, true}, {"bf16", 128, 300, 3, true}} {
		name := fmt.Sprintf("kv=%s/chunk=%d/ctx=%d/k=%d/proposal=%v", tc.kv, tc.chunk, tc.ctx, tc.k, tc.proposal)
		weights := model
		if tc.proposal {
			weights = draftModel
		}
		args := []string{"--weights", weights, "--backend", "cpu", "--available", strconv.FormatInt(A, 10),
			"--max-ctx", strconv.Itoa(tc.ctx), "--kv-capacity", strconv.Itoa(tc.ctx), "--kv-dtype", tc.kv,
			"--prefill-chunk", strconv.Itoa(tc.chunk), "--json"}
		if tc.k > 0 {
			args = append(args, "--spec", "mtp", "--draft-tokens", strconv.Itoa(tc.k))
		}
		if tc.proposal {
			args = append(args, "--lm-head-draft")
		}
		code, want, errs := runCmd(args...)
		if code != 0 {
			t.Fatalf("%s: ninfer-plan exit %d: %s", name, code, errs)
		}
		reservation := gjson.Get(want, "runtime_reservation_bytes").Int()
		if reservation <= 0 {
			t.Fatalf("%s: reservation %d", name, reservation)
		}
		readings := []int64{A, A - reservation}
		env := bench.Env{
			MemAvailable: func() (int64, error) {
				v := readings[0]
				if len(readings) > 1 {
					readings = readings[1:]
				}
				return v, nil
			},
			CPUName: func() string { return "Test CPU" }, RunID: "e2e", Command: "ninfer-bench",
		}
		p := bench.DefaultParams()
		p.Weights, p.Corpus = weights, corpus
		p.Prompts, p.Gens, p.Pairs = []int{16}, []int{4}, nil
		p.Repetitions, p.Warmup = 1, 0
		p.Backend, p.Threads = "cpu", 2
		p.KVDtype, p.PrefillChunk, p.MaxCtx = tc.kv, tc.chunk, tc.ctx
		if tc.k > 0 {
			p.Spec, p.DraftTokens, p.LMHeadDraft = bench.SpecMTP, tc.k, tc.proposal
		}
		var col bench.Collect
		res, err := bench.Run(context.Background(), p, env, &col)
		if err != nil {
			t.Fatalf("%s: bench: %v", name, err)
		}
		if len(res.Notes) != 0 {
			t.Errorf("%s: notes %q", name, res.Notes)
		}
		got, err := memoryJSON(col.Lines[0].Run.Memory)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: ninfer-bench memory differs from ninfer-plan --json:\n%s\nplan:\n%s", name, got, want)
		}
		if tc.k > 0 && col.Lines[0].Run.Config.SpeculativeBackend != "mtp" {
			t.Errorf("%s: the run was not speculative: %+v", name, col.Lines[0].Run.Config)
		}
	}
}

// memoryJSON encodes a run line's memory object as ninfer-plan --json does.
func memoryJSON(m benchfmt.Memory) (string, error) {
	a := func(x benchfmt.Arena) plan.ArenaUsage {
		return plan.ArenaUsage{CapacityBytes: x.CapacityBytes, UsedBytes: x.UsedBytes, PeakUsedBytes: x.PeakUsedBytes}
	}
	if m.VisionWorkspace != nil {
		return "", fmt.Errorf("vision workspace %+v, want null", m.VisionWorkspace)
	}
	b, err := plan.Memory{
		Device: int(m.Device), MaxContext: m.MaxContext, KVCapacityMode: m.KVCapacityMode, KVCapacity: m.KVCapacity,
		KVCapacityPageGroups: m.KVCapacityPageGroups, KVCapacityMaxPageGroups: m.KVCapacityMaxPageGroups, KVCache: m.KVCache,
		Weights: a(m.Weights), Sequence: a(m.Sequence), Workspace: a(m.Workspace),
		MinimumRuntimeReservationBytes: m.MinimumRuntimeReservationBytes, KVCapacityIncrementBytes: m.KVCapacityIncrementBytes,
		RuntimeReservationBytes: m.RuntimeReservationBytes, AvailableAfterWeightsBytes: m.AvailableAfterWeightsBytes,
		AvailableAfterStartupBytes: m.AvailableAfterStartupBytes, KVCapacityHeadroomBytes: m.KVCapacityHeadroomBytes,
		PlannedSlackBytes: m.PlannedSlackBytes, CUDAGraphAllowanceBytes: m.CUDAGraphAllowanceBytes, KVPayloadBytes: m.KVPayloadBytes,
	}.JSON()
	return string(b), err
}
