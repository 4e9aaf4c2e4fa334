// Package testfixture gives tests the tiny generated Qwen3.5 model
// (pkg/testmodel) as a Hugging Face directory and converted to .ninfer
// artifacts (pkg/convert), so every test package builds them the same way.
//
// HFDir writes a fresh directory per call, for tests that edit it. Artifact
// and Build convert once per test binary and spec and share the file; a
// package using them runs its tests through Main, which removes the files
// when the binary ends:
//
//	func TestMain(m *testing.M) { testfixture.Main(m) }
package testfixture

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

// Spec selects a cached artifact.
type Spec struct {
	// Recipe is the recipe name ("q8", "fp32", ...).
	Recipe string
	// Model is the generated model; the zero value means
	// testmodel.DefaultOptions().
	Model testmodel.Options
	// Draft, when non-empty, adds a proposal head over these token ids.
	Draft []int32
}

// Model options with the defaults filled in.
func (s Spec) model() testmodel.Options {
	if s.Model == (testmodel.Options{}) {
		return testmodel.DefaultOptions()
	}
	return s.Model
}

// cached is one file built at most once per test binary.
type cached struct {
	once sync.Once
	path string
	err  error
}

var (
	mainActive atomic.Bool
	mu         sync.Mutex
	root       string                 // the binary's fixture directory, made on first use
	hfDirs     = map[string]*cached{} // by model options
	artifacts  = map[string]*cached{} // by spec
)

// Main runs the tests of m and then removes every cached artifact. Call it
// from TestMain in each package that uses Artifact or Build.
func Main(m *testing.M) {
	mainActive.Store(true)
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes the cached artifacts; the next Build makes them again.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if root != "" {
		os.RemoveAll(root)
	}
	root = ""
	hfDirs = map[string]*cached{}
	artifacts = map[string]*cached{}
}

// HFDir writes the tiny model, the default options changed by mutate (nil
// for none), into a fresh t.TempDir() and returns the directory.
func HFDir(t testing.TB, mutate func(*testmodel.Options)) string {
	t.Helper()
	o := testmodel.DefaultOptions()
	if mutate != nil {
		mutate(&o)
	}
	dir := filepath.Join(t.TempDir(), "hf")
	if _, err := testmodel.WriteDir(dir, o, false); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Recipe returns the named recipe.
func Recipe(t testing.TB, name string) recipe.Recipe {
	t.Helper()
	r, err := recipe.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Artifact returns the path of the tiny model, the default options changed
// by mutate (nil for none), converted with the named recipe. See Build.
func Artifact(t testing.TB, recipeName string, mutate func(*testmodel.Options)) string {
	t.Helper()
	o := testmodel.DefaultOptions()
	if mutate != nil {
		mutate(&o)
	}
	return Build(t, Spec{Recipe: recipeName, Model: o})
}

// Build returns the path of the artifact s describes. It is generated and
// converted (two workers) once per test binary and spec; callers must not
// modify it. The package's TestMain must call Main.
func Build(t testing.TB, s Spec) string {
	t.Helper()
	if !mainActive.Load() {
		t.Fatal("testfixture: call testfixture.Main from TestMain so the cached artifacts are removed")
	}
	s.Model = s.model()
	c := entry(artifacts, fmt.Sprintf("%#v", s))
	c.once.Do(func() { c.path, c.err = build(s) })
	if c.err != nil {
		t.Fatalf("testfixture: %v", c.err)
	}
	return c.path
}

// entry returns the cache entry for key, adding an empty one.
func entry(m map[string]*cached, key string) *cached {
	mu.Lock()
	defer mu.Unlock()
	c, ok := m[key]
	if !ok {
		c = &cached{}
		m[key] = c
	}
	return c
}

// subdir makes a new directory named prefix* in the binary's fixture
// directory, which it makes on first use.
func subdir(prefix string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if root == "" {
		d, err := os.MkdirTemp("", "ninfer-testfixture-")
		if err != nil {
			return "", err
		}
		root = d
	}
	return os.MkdirTemp(root, prefix)
}

// hfDir returns the shared Hugging Face directory of the model o.
func hfDir(o testmodel.Options) (string, error) {
	c := entry(hfDirs, fmt.Sprintf("%#v", o))
	c.once.Do(func() {
		d, err := subdir("hf-")
		if err != nil {
			c.err = err
			return
		}
		c.path = filepath.Join(d, "tiny-hf") // the artifact name comes from this
		if _, err := testmodel.WriteDir(c.path, o, false); err != nil {
			c.err = fmt.Errorf("generate %s: %w", c.path, err)
		}
	})
	return c.path, c.err
}

func build(s Spec) (string, error) {
	r, err := recipe.Lookup(s.Recipe)
	if err != nil {
		return "", err
	}
	src, err := hfDir(s.model())
	if err != nil {
		return "", err
	}
	d, err := subdir("artifact-")
	if err != nil {
		return "", err
	}
	dst := filepath.Join(d, "tiny-"+s.Recipe+".ninfer")
	opt := convert.Options{Recipe: r, Workers: 2}
	if len(s.Draft) > 0 {
		opt.Draft = &convert.DraftHead{TokenIDs: s.Draft}
	}
	if _, err := convert.Convert(context.Background(), src, dst, opt); err != nil {
		return "", fmt.Errorf("convert %s with %s: %w", src, s.Recipe, err)
	}
	return dst, nil
}

// SkipIfSignalsIgnored skips t when the test process ignores one of sigs
// (started under nohup, say): the tool it spawns inherits the ignored
// disposition and rightly keeps it (pkg/cliutil), so a test that expects
// the tool to stop on that signal cannot hold there.
func SkipIfSignalsIgnored(t testing.TB, sigs []syscall.Signal) {
	t.Helper()
	for _, s := range sigs {
		if signal.Ignored(s) {
			t.Skipf("%v is ignored in this process (nohup?): the spawned tool inherits that and keeps it ignored", s)
		}
	}
}
