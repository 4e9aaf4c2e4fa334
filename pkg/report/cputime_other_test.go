//go:build !unix

package report

import "time"

func processCPU() time.Duration { return 0 }
