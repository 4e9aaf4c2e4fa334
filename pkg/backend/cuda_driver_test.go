//go:build cuda

package backend

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeLibcuda is a stand-in NVIDIA driver: the static CUDA runtime dlopens
// libcuda.so.1 and asks it for its entry points; this one reports no device
// (cuInit → CUDA_ERROR_NO_DEVICE), or with NINFER_FAKE_CUDA=old a driver
// that supports only CUDA 12.8.
const fakeLibcuda = `#include <stdlib.h>
#include <string.h>
typedef int CUresult;
static int old(void) { const char *m = getenv("NINFER_FAKE_CUDA"); return m && strcmp(m, "old") == 0; }
CUresult cuInit(unsigned f) { (void)f; return old() ? 0 : 100; }
CUresult cuDriverGetVersion(int *v) { *v = old() ? 12080 : 13000; return 0; }
CUresult cuGetProcAddress(const char *s, void **p, int v, unsigned long long fl) {
	(void)v; (void)fl;
	if (!strcmp(s, "cuInit")) *p = (void *)cuInit;
	else if (!strcmp(s, "cuDriverGetVersion")) *p = (void *)cuDriverGetVersion;
	else if (!strcmp(s, "cuGetProcAddress")) *p = (void *)cuGetProcAddress;
	else { *p = 0; return 500; }
	return 0;
}
CUresult cuGetProcAddress_v2(const char *s, void **p, int v, unsigned long long fl, int *st) {
	if (st) *st = 0;
	return cuGetProcAddress(s, p, v, fl);
}
`

// TestCUDADriverProbeChild is the child side of TestCUDAFakeDriver: it
// prints what NewCUDA says under the driver it was started with.
func TestCUDADriverProbeChild(t *testing.T) {
	if os.Getenv("NINFER_DRIVER_CHILD") != "1" {
		t.Skip("child process of TestCUDAFakeDriver")
	}
	_, err := NewCUDA(CUDAOptions{})
	if err == nil {
		os.Stdout.WriteString("RESULT: ok\n")
		return
	}
	os.Stdout.WriteString("RESULT: " + err.Error() + "\n")
}

// TestCUDAFakeDriver runs the real static CUDA runtime against a fake
// driver library: "driver present, no device" and "driver too old" must
// each give the one-line explanation with the CUDA error code.
func TestCUDAFakeDriver(t *testing.T) {
	if os.Getenv("NINFER_DRIVER_CHILD") == "1" {
		t.Skip("parent only")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fake.c")
	if err := os.WriteFile(src, []byte(fakeLibcuda), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), src).CombinedOutput(); err != nil {
		t.Fatalf("building the fake driver: %v\n%s", err, out)
	}
	for _, c := range []struct {
		mode string
		want []string
	}{
		{"nodevice", []string{"reports no CUDA device", "CUDA error 100"}},
		{"old", []string{"supports CUDA 12.8", "needs CUDA 13.0", "driver 580 or newer", "CUDA error 35"}},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCUDADriverProbeChild$", "-test.v")
		cmd.Env = append(os.Environ(), "NINFER_DRIVER_CHILD=1", "NINFER_FAKE_CUDA="+c.mode, "LD_LIBRARY_PATH="+dir)
		out, _ := cmd.CombinedOutput()
		line := ""
		for _, l := range strings.Split(string(out), "\n") {
			if r, ok := strings.CutPrefix(l, "RESULT: "); ok {
				line = r
			}
		}
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("fake driver %s: NewCUDA says %q, want it to contain %q\n%s", c.mode, line, w, out)
			}
		}
	}
}
