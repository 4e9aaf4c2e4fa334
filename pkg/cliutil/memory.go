package cliutil

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MemAvailable is the memory the kernel says can be allocated without
// swapping (MemAvailable of /proc/meminfo), in bytes; ok is false where
// that is not known.
func MemAvailable() (n int64, ok bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return parseMemAvailable(data)
}

func parseMemAvailable(data []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// CheckMemory refuses work that needs about need bytes when less is
// available (MemAvailable), with one line saying both: "WHAT needs about
// 8.0 GiB of memory, 2.1 GiB is available". Where the available memory is
// not known it passes.
func CheckMemory(what string, need int64) error {
	avail, ok := MemAvailable()
	if !ok {
		return nil
	}
	return checkMemory(what, need, avail)
}

func checkMemory(what string, need, avail int64) error {
	if need <= avail {
		return nil
	}
	return fmt.Errorf("%s needs about %s of memory, %s is available (MemAvailable in /proc/meminfo); choose smaller sizes", what, gib(need), gib(avail))
}

func gib(n int64) string {
	const g = 1 << 30
	if n >= 1<<62 {
		return "more than 4 EiB"
	}
	if n >= g {
		return fmt.Sprintf("%.1f GiB", float64(n)/g)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
