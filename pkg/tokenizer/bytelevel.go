package tokenizer

// GPT-2 byte-level alphabet: every byte maps to one printable rune so that
// BPE can work on strings. Bytes that are already printable Latin-1
// characters ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves; the other 68
// bytes map, in increasing byte order, to U+0100, U+0101, ...

var (
	byteToRune [256]rune
	runeToByte map[rune]byte
)

func init() {
	runeToByte = make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelEncode maps raw bytes to their byte-level string form.
func byteLevelEncode(s string) string {
	buf := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		buf[i] = byteToRune[s[i]]
	}
	return string(buf)
}

// byteLevelDecode maps a byte-level token string back to raw bytes. Like the
// Hugging Face ByteLevel decoder, a token containing a rune outside the
// byte-level alphabet is passed through as its own UTF-8 bytes.
func byteLevelDecode(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}
