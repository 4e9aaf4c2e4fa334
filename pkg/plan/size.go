package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses a byte size: a plain integer ("24000000000") or a number
// with a unit: B, KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB (powers
// of 1024), case-insensitive, e.g. "24GiB", "24GB", "512MiB", "1.5GiB". The
// result must be a positive whole number of bytes.
func ParseSize(s string) (int64, error) { return parseSize(s, false) }

// ParseSizeOrZero is ParseSize that also accepts a zero size ("0", "0B",
// "0GiB"), for flags where none is meaningful (--headroom,
// --runtime-overhead).
func ParseSizeOrZero(s string) (int64, error) { return parseSize(s, true) }

func parseSize(s string, zero bool) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
	m, ok := mult[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid size %q (want bytes, or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err == nil && (n > 0 || zero && n == 0) && float64(n)*m < 1<<62 {
			return n * int64(m), nil
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0 || zero && v == 0) || v*m >= 1<<62 || v*m != math.Trunc(v*m) {
		what := "positive"
		if zero {
			what = "non-negative"
		}
		return 0, fmt.Errorf("invalid size %q (must be a %s whole number of bytes)", s, what)
	}
	return int64(v * m), nil
}
