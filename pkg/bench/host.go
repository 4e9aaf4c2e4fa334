package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// CPUName returns the first "model name" of /proc/cpuinfo, or "" when it
// cannot be read.
func CPUName() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return parseCPUName(data)
}

func parseCPUName(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// MemAvailable returns MemAvailable of /proc/meminfo in bytes: the CPU
// backend's stand-in for cudaMemGetInfo().free.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("memory budget: %w", err)
	}
	defer f.Close()
	return parseMemAvailable(f)
}

func parseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemAvailable" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("memory budget: /proc/meminfo: malformed MemAvailable line %q", sc.Text())
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("memory budget: /proc/meminfo: malformed MemAvailable line %q", sc.Text())
		}
		return n << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("memory budget: /proc/meminfo: %w", err)
	}
	return 0, fmt.Errorf("memory budget: /proc/meminfo has no MemAvailable line")
}
