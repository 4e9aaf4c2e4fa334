package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

var (
	pyOnce sync.Once
	pyPath string
	pySkip string
)

// pythonSafetensors returns the python3 path when the Hugging Face
// safetensors and numpy packages are importable, else skips (CI).
func pythonSafetensors(t *testing.T) string {
	t.Helper()
	pyOnce.Do(func() {
		py, err := exec.LookPath("python3")
		if err != nil {
			pySkip = "python3 not found"
			return
		}
		if err := exec.Command(py, "-c", "import safetensors.numpy, numpy").Run(); err != nil {
			pySkip = "python packages safetensors/numpy not installed"
			return
		}
		pyPath = py
	})
	if pySkip != "" {
		t.Skip(pySkip)
	}
	return pyPath
}

func runPython(t *testing.T, py, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	return out
}

// Files we write load in the Hugging Face reader with the same values.
func TestPythonReadsOurFiles(t *testing.T) {
	py := pythonSafetensors(t)
	r := seeded(t)
	f32 := make([]float32, 12)
	for i := range f32 {
		f32[i] = float32(r.NormFloat64())
	}
	f32b, _ := EncodeF32(F32, f32, nil)
	f16b, _ := EncodeF32(F16, f32[:6], nil)
	i64 := binary.LittleEndian.AppendUint64(nil, uint64(r.Int64()))
	tensors := []NamedTensor{
		{Name: "w.f32", DType: F32, Shape: []int64{3, 4}, Data: f32b},
		{Name: "w.f16", DType: F16, Shape: []int64{6}, Data: f16b},
		{Name: "u8", DType: U8, Shape: []int64{1, 3}, Data: randBytes(r, 3)},
		{Name: "i64", DType: I64, Shape: []int64{}, Data: i64},
	}
	path := filepath.Join(t.TempDir(), "go.safetensors")
	if err := Write(path, tensors, map[string]string{"format": "pt", "by": "ninfer"}); err != nil {
		t.Fatal(err)
	}
	out := runPython(t, py, `
import json, sys
from safetensors import safe_open
res = {}
with safe_open(sys.argv[1], framework="numpy") as f:
    res["__metadata__"] = f.metadata()
    for k in f.keys():
        a = f.get_tensor(k)
        res[k] = {"dtype": str(a.dtype), "shape": list(a.shape), "hex": a.tobytes().hex()}
print(json.dumps(res))
`, path)
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	var md map[string]string
	json.Unmarshal(got["__metadata__"], &md)
	if !reflect.DeepEqual(md, map[string]string{"format": "pt", "by": "ninfer"}) {
		t.Errorf("metadata %v", md)
	}
	for _, want := range tensors {
		var g struct {
			Shape []int64 `json:"shape"`
			Hex   string  `json:"hex"`
		}
		if err := json.Unmarshal(got[want.Name], &g); err != nil {
			t.Fatalf("%s: %v", want.Name, err)
		}
		if len(g.Shape) == 0 {
			g.Shape = []int64{}
		}
		if !reflect.DeepEqual(g.Shape, want.Shape) || g.Hex != hexOf(want.Data) {
			t.Errorf("%s: python sees shape %v data %s, want %v %s", want.Name, g.Shape, g.Hex, want.Shape, hexOf(want.Data))
		}
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// Files the Hugging Face writer produces open here with the same values.
func TestReadPythonFiles(t *testing.T) {
	py := pythonSafetensors(t)
	path := filepath.Join(t.TempDir(), "py.safetensors")
	runPython(t, py, `
import sys, numpy as np
from safetensors.numpy import save_file
save_file({
    "b": np.arange(10, dtype=np.float32).reshape(2, 5) * 0.5 - 1,
    "a": np.array([1.5, -2.25, 65504], dtype=np.float16),
    "c": np.array([[True, False, True]]),
    "d": np.array(7, dtype=np.int32),
}, sys.argv[1], metadata={"format": "np"})
`, path)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata()["format"] != "np" {
		t.Errorf("metadata %v", f.Metadata())
	}
	b := make([]float32, 10)
	ti, _ := f.Lookup("b")
	if err := DecodeF32(ti.DType, f.Data("b"), b); err != nil || !reflect.DeepEqual(ti.Shape, []int64{2, 5}) {
		t.Fatalf("b: %v %v", err, ti)
	}
	for i, v := range b {
		if want := float32(i)*0.5 - 1; v != want {
			t.Errorf("b[%d] = %g, want %g", i, v, want)
		}
	}
	a := make([]float32, 3)
	if err := DecodeF32(F16, f.Data("a"), a); err != nil || a[0] != 1.5 || a[1] != -2.25 || a[2] != 65504 {
		t.Errorf("a = %v %v", a, err)
	}
	if ti, _ := f.Lookup("c"); ti.DType != BOOL || !bytes.Equal(f.Data("c"), []byte{1, 0, 1}) {
		t.Errorf("c: %+v %v", ti, f.Data("c"))
	}
	if ti, _ := f.Lookup("d"); ti.DType != I32 || len(ti.Shape) != 0 || binary.LittleEndian.Uint32(f.Data("d")) != 7 {
		t.Errorf("d: %+v %v", ti, f.Data("d"))
	}
}
