package backend

import (
	"strings"
	"testing"
)

func TestExplainCUDAError(t *testing.T) {
	cases := []struct {
		code, driver, runtime int
		msg                   string
		want                  []string
	}{
		{35, 0, 13000, "CUDA driver version is insufficient", []string{"no NVIDIA driver found", "libcuda.so.1", "CUDA error 35"}},
		{35, 12080, 13000, "", []string{"supports CUDA 12.8", "needs CUDA 13.0", "driver 580 or newer", "CUDA error 35"}},
		{35, 12090, 0, "", []string{"supports CUDA 12.9", "needs CUDA 13.0"}},
		{100, 13000, 13000, "no CUDA-capable device is detected", []string{"reports no CUDA device", "CUDA error 100"}},
		{101, 13000, 13000, "device 3 does not exist (1 CUDA devices)", []string{"device 3 does not exist", "CUDA error 101"}},
		{999, 13000, 13000, "", []string{"CUDA initialisation failed", "CUDA error 999"}},
	}
	for _, c := range cases {
		got := ExplainCUDAError(c.code, c.driver, c.runtime, c.msg)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("ExplainCUDAError(%d, %d, %d) = %q, want it to contain %q", c.code, c.driver, c.runtime, got, w)
			}
		}
		if strings.Contains(got, "\n") {
			t.Errorf("ExplainCUDAError(%d, ...) is not one line: %q", c.code, got)
		}
	}
}
