package testfixture

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ninfer/ninfer/pkg/artifact"
	"github.com/ninfer/ninfer/pkg/qwen35"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

func TestMain(m *testing.M) { Main(m) }

func readConfig(t *testing.T, dir string) (qwen35.Config, qwen35.Layout) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, layout, err := qwen35.ParseHFConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, layout
}

func TestHFDir(t *testing.T) {
	cases := []struct {
		name       string
		mutate     func(*testmodel.Options)
		layers     int
		layout     qwen35.Layout
		indexFile  bool
		vocabWant  int
		hiddenWant int
	}{
		{"default", nil, 4, qwen35.LayoutCausalLM, false, 512, 128},
		{"multimodal sharded", func(o *testmodel.Options) { o.Multimodal = true; o.Shards = 3 }, 4, qwen35.LayoutMultimodal, true, 512, 128},
		{"eight layers", func(o *testmodel.Options) { o.Layers = 8 }, 8, qwen35.LayoutCausalLM, false, 512, 128},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := HFDir(t, c.mutate)
			cfg, layout := readConfig(t, dir)
			if cfg.NumHiddenLayers != c.layers || layout != c.layout || cfg.VocabSize != c.vocabWant || cfg.HiddenSize != c.hiddenWant {
				t.Errorf("layers %d layout %d vocab %d hidden %d, want %d %d %d %d",
					cfg.NumHiddenLayers, layout, cfg.VocabSize, cfg.HiddenSize, c.layers, c.layout, c.vocabWant, c.hiddenWant)
			}
			_, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json"))
			if got := err == nil; got != c.indexFile {
				t.Errorf("index file present = %t, want %t", got, c.indexFile)
			}
			if again := HFDir(t, c.mutate); again == dir {
				t.Errorf("HFDir returned %s twice; each call must get a fresh directory", dir)
			}
		})
	}
}

// openArtifact opens path and returns its recipe and proposal-head rows (0
// without one).
func openArtifact(t *testing.T, path string) (string, int64) {
	t.Helper()
	f, err := artifact.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, _ := f.Metadata["recipe"].(string)
	var rows int64
	if f.Proposal != nil {
		rows = f.Proposal.Rows
	}
	return r, rows
}

func TestBuildCaches(t *testing.T) {
	q8 := Artifact(t, "q8", nil)
	draft := []int32{0, 3, 6, 9, 12}
	cases := []struct {
		name      string
		path      string
		samePath  bool // the same cached file as q8
		recipe    string
		draftRows int64
	}{
		{"q8 again", Artifact(t, "q8", nil), true, "q8", 0},
		{"zero Model means default", Build(t, Spec{Recipe: "q8"}), true, "q8", 0},
		{"default options spelt out", Build(t, Spec{Recipe: "q8", Model: testmodel.DefaultOptions()}), true, "q8", 0},
		{"other recipe", Artifact(t, "bf16", nil), false, "bf16", 0},
		{"draft head", Build(t, Spec{Recipe: "q8", Draft: draft}), false, "q8", int64(len(draft))},
		{"other model", Artifact(t, "q8", func(o *testmodel.Options) { o.Seed = 2 }), false, "q8", 0},
	}
	seen := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if (c.path == q8) != c.samePath {
				t.Fatalf("path %s, q8 is %s: same = %t, want %t", c.path, q8, c.path == q8, c.samePath)
			}
			if !c.samePath {
				if prev, dup := seen[c.path]; dup {
					t.Fatalf("%s shares its file with %s", c.name, prev)
				}
				seen[c.path] = c.name
			}
			r, rows := openArtifact(t, c.path)
			if r != c.recipe || rows != c.draftRows {
				t.Errorf("recipe %q, proposal rows %d; want %q, %d", r, rows, c.recipe, c.draftRows)
			}
			if got, want := filepath.Base(c.path), "tiny-"+c.recipe+".ninfer"; got != want {
				t.Errorf("artifact file %s, want it named %s", c.path, want)
			}
		})
	}
}

// fatalRecorder is a testing.TB whose Fatal records the message and ends
// the calling goroutine, as testing.T does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatal(a ...any) { r.msg = fmt.Sprint(a...); runtime.Goexit() }

func (r *fatalRecorder) Fatalf(format string, a ...any) {
	r.msg = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

// fatalOf runs f with a recorder and returns the Fatal message ("" if f
// returned normally).
func fatalOf(t *testing.T, f func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestBuildErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(tb testing.TB)
		want string
	}{
		{"unknown recipe", func(tb testing.TB) { Artifact(tb, "no-such-recipe", nil) }, "no-such-recipe"},
		{"unknown recipe for Recipe", func(tb testing.TB) { Recipe(tb, "no-such-recipe") }, "no-such-recipe"},
		{"invalid model", func(tb testing.TB) { Artifact(tb, "q8", func(o *testmodel.Options) { o.Hidden = -1 }) }, "testfixture: generate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := fatalOf(t, c.f)
			if !strings.Contains(msg, c.want) {
				t.Errorf("Fatal message %q, want it to mention %q", msg, c.want)
			}
		})
	}
	// A failed build is cached: asking again reports the same error.
	a := fatalOf(t, func(tb testing.TB) { Artifact(tb, "no-such-recipe", nil) })
	b := fatalOf(t, func(tb testing.TB) { Artifact(tb, "no-such-recipe", nil) })
	if a == "" || a != b {
		t.Errorf("second failure %q, first %q", b, a)
	}
}

func TestBuildNeedsMain(t *testing.T) {
	mainActive.Store(false)
	defer mainActive.Store(true)
	if msg := fatalOf(t, func(tb testing.TB) { Artifact(tb, "q8", nil) }); !strings.Contains(msg, "testfixture.Main") {
		t.Errorf("Fatal message %q, want it to ask for testfixture.Main", msg)
	}
}

func TestCleanupRemovesFiles(t *testing.T) {
	p := Artifact(t, "q8", nil)
	Cleanup()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("after Cleanup %s: %v, want it removed", p, err)
	}
	q := Artifact(t, "q8", nil)
	if _, err := os.Stat(q); err != nil {
		t.Fatalf("rebuilt artifact: %v", err)
	}
	if q == p {
		t.Errorf("rebuilt artifact reuses the removed path %s", p)
	}
}
