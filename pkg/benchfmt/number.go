package benchfmt

import (
	"math"
	"strconv"
)

// FormatDouble renders v the way the reference writer does (C printf "%.10g",
// i.e. ostream << setprecision(10)). Go's 'g' verb with precision 10 yields
// the same text for every finite double (checked against glibc output in
// testdata/c_printf_10g.txt): both switch to exponent form when the decimal
// exponent is < -4 or >= 10, both strip trailing zeros, and both write at
// least two exponent digits ("1e-06").
//
// NaN and ±Inf have no JSON spelling (C would print "nan"/"inf", which is not
// JSON); they are written as null.
func FormatDouble(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "null"
	}
	return strconv.FormatFloat(v, 'g', 10, 64)
}

// AppendDouble appends FormatDouble(v) to dst.
func AppendDouble(dst []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, v, 'g', 10, 64)
}

// Round10 returns v rounded to 10 significant digits, i.e. the value a reader
// gets back after v was written with FormatDouble.
func Round10(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, _ := parseDouble(strconv.FormatFloat(v, 'g', 10, 64)) // ±MaxFloat64 rounds past the range: read back as itself
	return r
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal escaped like the reference
// json_escape: \" \\ \n \r \t, other bytes below 0x20 as \u00xx (lowercase
// hex), everything else (including '<', '>', '&', U+2028 and any UTF-8) raw.
// Invalid UTF-8 is passed through byte for byte as well, as the reference does.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// QuoteString returns AppendString(nil, s) as a string.
func QuoteString(s string) string { return string(AppendString(nil, s)) }
