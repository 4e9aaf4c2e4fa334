//go:build unix

package report

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of this process (all threads,
// GC included), so benchmark results stay meaningful on a loaded machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
