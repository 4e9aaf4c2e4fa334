package format

import "math"

// ErrorBound returns an upper bound on |x − x̂| for one element x encoded by
// this package's encoder and decoded by the reference decoder, given the
// element's stored scale as decoded to a real number:
//
//   - grouped int (q4/q5/q6/q8): scale = f32(f16 group scale) s. The bound is
//     max(s/2, |x| − s·qmax) plus float32 slack |x|·2^-21. With a normal f16
//     scale the clamp term never exceeds s/2 (f16 rounds amax/qmax by at most
//     a factor 1±2^-11, so amax/s ≤ qmax + qmax·2^-10 < qmax + 1/2); it
//     matters only for subnormal scales (tiny groups), where f16 may round
//     amax/qmax down by up to 1/3.
//   - nvfp4: scale = e4m3(block scale)/d_w, the step unit u. With v = |x|/u
//     the E2M1 half-spacing is 1/4 below 2, 1/2 in [2,4) and 1 from 4 up;
//     the bound is u·half(v) plus the saturation excess max(0, |x| − 6u)
//     plus |x|·2^-20.
//   - fp8_e4m3fn_row_bf16: scale = bf16 row scale s; with v = |x|/s the E4M3
//     half-ulp is 2^(e−4) for normal v in [2^e, 2^(e+1)) (e ≥ −6) and 2^-10
//     below 2^-6; bound s·half(v) + max(0, |x| − 448s) + |x|·2^-20.
//   - bf16: |x|·2^-8 (RNE half-ulp); fp32 and int32: 0.
//
// A zero scale means the element was encoded as 0, so the bound is |x|.
func ErrorBound(f Format, x, scale float64) float64 {
	a := math.Abs(x)
	switch f {
	case BF16:
		return a * math.Ldexp(1, -8)
	case FP32, Int32:
		return 0
	}
	if scale == 0 {
		return a
	}
	switch f {
	case NVFP4:
		v := a / scale
		half := 0.25
		switch {
		case v >= 4:
			half = 1
		case v >= 2:
			half = 0.5
		}
		return scale*half + math.Max(0, a-6*scale) + a*math.Ldexp(1, -20)
	case FP8Row:
		v := a / scale
		half := math.Ldexp(1, -10)
		if v >= math.Ldexp(1, -6) {
			_, e := math.Frexp(v) // v = m·2^e, m in [0.5,1): v in [2^(e-1), 2^e)
			half = math.Ldexp(1, e-1-4)
		}
		return scale*half + math.Max(0, a-448*scale) + a*math.Ldexp(1, -20)
	}
	p, ok := f.Group()
	if !ok {
		return math.Inf(1)
	}
	return math.Max(scale/2, a-scale*float64(p.QMax)) + a*math.Ldexp(1, -21)
}
