// Package runnertest builds the tiny generated model as a .ninfer artifact
// for the tests of pkg/runner and cmd/ninfer-run.
package runnertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ninfer/ninfer/pkg/convert"
	"github.com/ninfer/ninfer/pkg/recipe"
	"github.com/ninfer/ninfer/pkg/testmodel"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
)

// Artifact returns the path of the default tiny test model converted with
// the named recipe ("fp32" or "q8"). It is built once per process into a
// temporary directory; call Cleanup (from TestMain) to remove it.
func Artifact(recipeName string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[recipeName]; ok {
		return p, nil
	}
	r, err := recipe.Lookup(recipeName)
	if err != nil {
		return "", err
	}
	root, err := os.MkdirTemp("", "ninfer-runnertest-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "hf")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	if _, err := testmodel.Generate(src, testmodel.DefaultOptions()); err != nil {
		return "", fmt.Errorf("runnertest: generate: %w", err)
	}
	dst := filepath.Join(root, "tiny-"+recipeName+".ninfer")
	if _, err := convert.Convert(context.Background(), src, dst, convert.Options{Recipe: r, Workers: 2}); err != nil {
		return "", fmt.Errorf("runnertest: convert: %w", err)
	}
	built[recipeName] = dst
	return dst, nil
}

// Cleanup removes every artifact built by Artifact.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	for k, p := range built {
		os.RemoveAll(filepath.Dir(p))
		delete(built, k)
	}
}
