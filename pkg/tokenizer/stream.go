package tokenizer

// StreamDecoder turns ids into text incrementally. Add returns only complete
// UTF-8: bytes of a character split across tokens are held back until the
// character is complete; bytes that can never become valid are replaced by
// U+FFFD as soon as that is certain. The concatenation of all Add results
// and the final Flush equals Decode of the same ids.
type StreamDecoder struct {
	t *Tokenizer
	// SkipSpecial drops special added tokens, like Decode's skipSpecial.
	SkipSpecial bool
	pending     []byte
	out         []byte
}

// NewStreamDecoder returns a decoder with no pending bytes that keeps special
// tokens (set SkipSpecial to drop them).
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Add feeds one id and returns the text that became complete (possibly "").
func (d *StreamDecoder) Add(id int32) string {
	d.pending = d.t.appendTokenBytes(d.pending, id, d.SkipSpecial)
	return d.drain(false)
}

// Flush returns whatever is pending, with an incomplete trailing sequence
// replaced by U+FFFD, and resets the decoder.
func (d *StreamDecoder) Flush() string {
	return d.drain(true)
}

// Pending reports how many bytes are held back.
func (d *StreamDecoder) Pending() int { return len(d.pending) }

func (d *StreamDecoder) drain(final bool) string {
	if len(d.pending) == 0 {
		return ""
	}
	var n int
	d.out, n = appendLossy(d.out[:0], d.pending, final)
	rest := copy(d.pending, d.pending[n:])
	d.pending = d.pending[:rest]
	return string(d.out)
}
