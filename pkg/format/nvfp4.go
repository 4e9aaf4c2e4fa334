package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// NVFP4 (block_scale_k16_m128x4_v1): E2M1 codes, one E4M3FN scale per 16
// K-elements stored in the m128x4 swizzled order, and a trailing FP32 weight
// divisor d_w; W = e2m1(c) · e4m3(s) / d_w. See docs/FORMATS-TENSOR.md §4.

// nvfp4Range is 6·448, the largest magnitude of e2m1 · e4m3.
const nvfp4Range = 6 * 448

// NVFP4Divisor returns the weight divisor the encoder uses for a tensor
// whose max|x| is amax: d_w = f32(2688/amax), stepped down (by float32 ulps)
// until f32(amax·d_w) ≤ 2688 so every scaled block fits under scale 448.
// amax 0 gives 1; a quotient beyond the float32 range is clamped to the
// largest finite float32. amax must be finite and ≥ 0.
func NVFP4Divisor(amax float32) (float32, error) {
	if !(amax >= 0 && amax <= maxF32) {
		return 0, fmt.Errorf("nvfp4: tensor max|x| %v is not finite and non-negative", amax)
	}
	if amax == 0 {
		return 1, nil
	}
	d := float32(nvfp4Range) / amax
	if d > maxF32 {
		d = maxF32
	}
	for amax*d > nvfp4Range {
		d = math.Nextafter32(d, 0)
	}
	return d, nil
}

// NVFP4ScaleOffset returns the byte offset, relative to the scale plane, of
// the block scale of row n, block g (= k/16) in a tensor with K columns:
// (rt·Kt + g/4)·512 + (ri%32)·16 + (ri/32)·4 + g%4, rt = n/128, ri = n%128,
// Kt = K/64.
func NVFP4ScaleOffset(n, g, k int64) int64 {
	rt, ri := n/128, n%128
	return (rt*(k/64)+g/4)*512 + (ri%32)*16 + (ri/32)*4 + g%4
}

// NVFP4BlockScale returns the E4M3FN code of a block whose max|x| is bamax
// under divisor d: the smallest E4M3 value ≥ f32(f32(bamax·d)/6), capped at
// 448 (0x7E); 0x00 when bamax·d is 0.
func NVFP4BlockScale(bamax, d float32) uint8 {
	return f32ToE4M3Up(bamax * d / 6)
}

// encodeNVFP4Row encodes row n (len(x) == K) into its code bytes and its
// (swizzled) scale bytes within the scale plane sp.
func encodeNVFP4Row(x []float32, d float32, n int64, codes, sp []byte) error {
	k := int64(len(x))
	var v [16]uint8
	for g := int64(0); g < k/16; g++ {
		blk := x[16*g : 16*g+16]
		bm, bad := amax(blk)
		if bad >= 0 {
			return fmt.Errorf("column %d is %v", 16*g+int64(bad), blk[bad])
		}
		s := NVFP4BlockScale(bm, d)
		sp[NVFP4ScaleOffset(n, g, k)] = s
		if s == 0 {
			clear(v[:])
		} else {
			m := d / e4m3Table[s] // f32(d_w / scale)
			for i, e := range blk {
				v[i] = F32ToE2M1(e * m)
			}
		}
		out := codes[8*g : 8*g+8]
		for j := range out {
			out[j] = v[2*j] | v[2*j+1]<<4
		}
	}
	return nil
}

// decodeNVFP4Row decodes row n into dst (len K).
func decodeNVFP4Row(codes, sp []byte, d float32, n int64, dst []float32) {
	k := int64(len(dst))
	for g := int64(0); g < k/16; g++ {
		s := e4m3Table[sp[NVFP4ScaleOffset(n, g, k)]]
		for j := int64(0); j < 8; j++ {
			b := codes[8*g+j]
			dst[16*g+2*j] = E2M1ToF32(b&0xF) * s / d
			dst[16*g+2*j+1] = E2M1ToF32(b>>4) * s / d
		}
	}
}

// nvfp4Divisor reads and checks the trailing divisor of an object.
func (g *geom) nvfp4Divisor(data []byte) (float32, error) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(data[g.nv.DivisorOff:]))
	if !(d > 0 && d <= maxF32) {
		return 0, fmt.Errorf("%s %v: weight divisor %v (at byte %d) is not finite and > 0", g.f, g.shape, d, g.nv.DivisorOff)
	}
	return d, nil
}

// validateNVFP4 checks every block scale byte of the object.
func (g *geom) validateNVFP4(data []byte) error {
	sp := data[g.nv.ScaleOff : g.nv.ScaleOff+g.nv.ScaleBytes]
	for n := int64(0); n < g.n; n++ {
		for b := int64(0); b < g.k/16; b++ {
			off := NVFP4ScaleOffset(n, b, g.k)
			if s := sp[off]; s >= 0x7F {
				return fmt.Errorf("%s %v: row %d block %d (columns %d..%d): scale byte 0x%02x (at byte %d) is not a finite non-negative e4m3",
					g.f, g.shape, n, b, 16*b, 16*b+15, s, g.nv.ScaleOff+off)
			}
		}
	}
	_, err := g.nvfp4Divisor(data)
	return err
}
