package format

import (
	"encoding/binary"
	"fmt"
)

// Grouped-integer formats (q4/q5/q6_g64_fp16, q8_g32_fp16) in the
// row_split_k128_v1 layout: symmetric signed codes, one f16 multiplier scale
// per group along K, planes base → high → scales. See docs/FORMATS-TENSOR.md §3.

// rneMagic is 1.5·2^23: for |y| < 2^22, (y+rneMagic)-rneMagic rounds y to an
// integer with ties to even in float32 arithmetic.
const rneMagic = float32(12582912)

// codeMin returns the smallest code the canonical encoder may emit:
// -2^(b-1) for Q4/Q5/Q6 and -127 for Q8 (0x80 is illegal).
func codeMin(p GroupParams) int {
	if p.Bits == 8 {
		return -127
	}
	return -(1 << (p.Bits - 1))
}

// GroupScale returns the canonical MAXABS_F16_RECIP_RNE_V1 f16 scale of a
// group with the given max|x|: +0 for amax 0, else f16(f32(amax/qmax)) with
// an f16 zero replaced by 0x0001. It fails when the scale overflows f16.
func GroupScale(p GroupParams, amax float32) (uint16, error) {
	if amax == 0 {
		return 0, nil
	}
	s := F32ToF16(amax / float32(p.QMax))
	if s == 0 {
		s = 1
	}
	if s >= 0x7C00 {
		return 0, fmt.Errorf("group max|x| %g needs a scale above the f16 range", amax)
	}
	return s, nil
}

// encodeGroupRow encodes one row (len(x) == K) into its base, high and scale
// spans. Columns in [K, K_pad) get code 0; wholly padded groups scale 0.
func encodeGroupRow(p GroupParams, x []float32, base, high, scales []byte) error {
	G := p.Group
	qmaxF, qminF := float32(p.QMax), float32(codeMin(p))
	var codes [64]int8
	gpr := len(scales) / 2
	for gi := 0; gi < gpr; gi++ {
		lo := gi * G
		hi := min(lo+G, len(x))
		var xs []float32
		if lo < len(x) {
			xs = x[lo:hi]
		}
		am, bad := amax(xs)
		if bad >= 0 {
			return fmt.Errorf("column %d is %v", lo+bad, xs[bad])
		}
		s, err := GroupScale(p, am)
		if err != nil {
			return fmt.Errorf("group %d (columns %d..%d): %w", gi, lo, lo+G-1, err)
		}
		binary.LittleEndian.PutUint16(scales[2*gi:], s)
		cs := codes[:G]
		if s == 0 {
			clear(cs)
		} else {
			inv := 1 / f16Table[s]
			for i, v := range xs {
				y := v * inv
				if y > qmaxF {
					y = qmaxF
				} else if y < qminF {
					y = qminF
				}
				cs[i] = int8((y + rneMagic) - rneMagic)
			}
			clear(cs[len(xs):])
		}
		packGroup(p, cs, base[gi*p.BaseBytes:(gi+1)*p.BaseBytes], high[gi*p.HighBytes:(gi+1)*p.HighBytes])
	}
	return nil
}

// packGroup writes one group's codes into its base and high-plane bytes.
func packGroup(p GroupParams, cs []int8, base, high []byte) {
	switch p.Bits {
	case 8:
		for i, c := range cs {
			base[i] = byte(c)
		}
		return
	}
	for j := range base {
		base[j] = byte(cs[2*j])&0xF | byte(cs[2*j+1])<<4
	}
	switch p.Bits {
	case 5:
		// Stream bit t = bit 4 of lane t, stored at bit t%8 of byte t/8.
		for j := range high {
			var b byte
			for t := 0; t < 8; t++ {
				b |= (byte(cs[8*j+t]) >> 4 & 1) << t
			}
			high[j] = b
		}
	case 6:
		// Stream bits 2l, 2l+1 = bits 4, 5 of lane l: byte l/4, bits 2(l%4)..+1.
		for j := range high {
			var b byte
			for t := 0; t < 4; t++ {
				b |= (byte(cs[4*j+t]) >> 4 & 3) << (2 * t)
			}
			high[j] = b
		}
	}
}

// unpackGroup reads one group's codes (sign-extended) from its plane bytes.
func unpackGroup(p GroupParams, base, high []byte, cs []int8) {
	switch p.Bits {
	case 8:
		for i := range cs {
			cs[i] = int8(base[i])
		}
	case 4:
		for j, b := range base {
			cs[2*j] = int8(b<<4) >> 4
			cs[2*j+1] = int8(b) >> 4
		}
	case 5:
		for j, b := range base {
			cs[2*j] = int8(b & 0xF)
			cs[2*j+1] = int8(b >> 4)
		}
		for l := range cs {
			u := byte(cs[l]) | (high[l/8]>>(l%8)&1)<<4
			cs[l] = int8(u<<3) >> 3
		}
	case 6:
		for j, b := range base {
			cs[2*j] = int8(b & 0xF)
			cs[2*j+1] = int8(b >> 4)
		}
		for l := range cs {
			u := byte(cs[l]) | (high[l/4]>>(2*(l%4))&3)<<4
			cs[l] = int8(u<<2) >> 2
		}
	}
}

// rowSpans returns row r's base, high and scale spans within data.
func (g *geom) rowSpans(data []byte, r int64) (base, high, scales []byte) {
	gpr := g.rs.GroupsPerRow
	b0 := g.rs.BaseOff + r*gpr*g.rs.BaseBytes
	h0 := g.rs.HighOff + r*gpr*g.rs.HighBytes
	s0 := g.rs.ScaleOff + r*gpr*2
	return data[b0 : b0+gpr*g.rs.BaseBytes], data[h0 : h0+gpr*g.rs.HighBytes], data[s0 : s0+gpr*2]
}

// decodeGroupRow decodes one row into dst (len K); padding columns are dropped.
func decodeGroupRow(p GroupParams, base, high, scales []byte, dst []float32) {
	var codes [64]int8
	G := p.Group
	cs := codes[:G]
	for gi := 0; gi*G < len(dst); gi++ {
		s := f16Table[binary.LittleEndian.Uint16(scales[2*gi:])]
		unpackGroup(p, base[gi*p.BaseBytes:(gi+1)*p.BaseBytes], high[gi*p.HighBytes:(gi+1)*p.HighBytes], cs)
		out := dst[gi*G : min((gi+1)*G, len(dst))]
		for i := range out {
			out[i] = s * float32(cs[i])
		}
	}
}

// validateGroupRow checks one row's scales and codes.
func validateGroupRow(p GroupParams, k int, base, high, scales []byte) error {
	var codes [64]int8
	G := p.Group
	cs := codes[:G]
	for gi := 0; gi < len(scales)/2; gi++ {
		lo := gi * G
		sb := binary.LittleEndian.Uint16(scales[2*gi:])
		where := func() string { return fmt.Sprintf("group %d (columns %d..%d)", gi, lo, lo+G-1) }
		if sb&0x8000 != 0 || sb&0x7C00 == 0x7C00 {
			return fmt.Errorf("%s: scale 0x%04x is not +0 or a finite positive f16", where(), sb)
		}
		unpackGroup(p, base[gi*p.BaseBytes:(gi+1)*p.BaseBytes], high[gi*p.HighBytes:(gi+1)*p.HighBytes], cs)
		if lo >= k && sb != 0 {
			return fmt.Errorf("%s: wholly padded group has scale 0x%04x, want 0x0000", where(), sb)
		}
		for i, c := range cs {
			switch {
			case p.Bits == 8 && c == -128:
				return fmt.Errorf("%s: column %d has illegal code 0x80", where(), lo+i)
			case c != 0 && lo+i >= k:
				return fmt.Errorf("%s: padding column %d has nonzero code %d", where(), lo+i, c)
			case c != 0 && sb == 0:
				return fmt.Errorf("%s: column %d has code %d under a +0 scale", where(), lo+i, c)
			}
		}
	}
	return nil
}
