package tokenizer

const replacementChar = "\uFFFD"

// utf8Lead returns, for a lead byte, the sequence length and the valid range
// of the second byte. n == 0 means the byte cannot start a sequence.
func utf8Lead(b byte) (n int, lo, hi byte) {
	switch {
	case b < 0x80:
		return 1, 0, 0
	case b >= 0xC2 && b <= 0xDF:
		return 2, 0x80, 0xBF
	case b == 0xE0:
		return 3, 0xA0, 0xBF
	case b == 0xED:
		return 3, 0x80, 0x9F
	case b >= 0xE1 && b <= 0xEF:
		return 3, 0x80, 0xBF
	case b == 0xF0:
		return 4, 0x90, 0xBF
	case b >= 0xF1 && b <= 0xF3:
		return 4, 0x80, 0xBF
	case b == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// appendLossy appends src to dst as valid UTF-8, replacing each maximal
// ill-formed subsequence with U+FFFD (the Unicode "substitution of maximal
// subparts" practice that Rust's String::from_utf8_lossy and therefore
// Hugging Face decoding follow). When final is false, an incomplete but so
// far valid sequence at the end of src is not consumed: consumed tells how
// many bytes of src were used.
func appendLossy(dst, src []byte, final bool) (out []byte, consumed int) {
	i := 0
	for i < len(src) {
		b := src[i]
		if b < 0x80 {
			dst = append(dst, b)
			i++
			continue
		}
		n, lo, hi := utf8Lead(b)
		if n == 0 {
			dst = append(dst, replacementChar...)
			i++
			continue
		}
		j := i + 1
		k := 1
		bad := false
		for k < n {
			if j >= len(src) {
				if !final {
					return dst, i
				}
				bad = true
				break
			}
			c := src[j]
			if k > 1 {
				lo, hi = 0x80, 0xBF
			}
			if c < lo || c > hi {
				bad = true
				break
			}
			j++
			k++
		}
		if bad {
			dst = append(dst, replacementChar...)
		} else {
			dst = append(dst, src[i:j]...)
		}
		i = j
	}
	return dst, i
}

// lossyString converts bytes to a valid UTF-8 string (see appendLossy).
func lossyString(b []byte) string {
	out, _ := appendLossy(make([]byte, 0, len(b)), b, true)
	return string(out)
}
