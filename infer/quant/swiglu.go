package quant

import "math"

// SwiGLU sets dst[i] = silu(gate[i])·up[i] as ggml_vec_swiglu_f32 computes
// it on x86 with AVX-512: blocks of 16 through ggml_v_silu (x / (1 +
// ggml_v_expf(−x))), the last len%16 elements through libm's expf. The
// slices must have equal lengths; dst may alias gate or up.
func SwiGLU(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	i := swigluSIMD(dst, gate, up)
	for ; i < n/16*16; i++ { // blocks of 16 without AVX-512: the same algorithm
		dst[i] = siluV(gate[i]) * up[i]
	}
	for ; i < n; i++ {
		x := gate[i]
		dst[i] = x / (1 + float32(math.Exp(float64(-x)))) * up[i]
	}
}

// siluV is ggml_v_silu on one lane.
func siluV(x float32) float32 { return x / (1 + expV(-x)) }

// expV is ggml_v_expf on one lane: x = n·ln 2 + b with n = round(x·log2 e),
// exp(b) by a degree-5 polynomial, times 2ⁿ; |n| > 192 gives 0 or +Inf.
// Its FMAs are rounded twice (f64, then f32), which differs from the
// hardware's single rounding only in rare ties.
func expV(x float32) float32 {
	const (
		shifter = 0x1.8p23
		log2e   = 0x1.715476p+0
		ln2hi   = 0x1.62e4p-1
		ln2lo   = 0x1.7f7d1cp-20
	)
	z := fma32(x, log2e, shifter)
	n := z - shifter
	b := fma32(-n, ln2lo, fma32(-n, ln2hi, x))
	if abs32(n) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u,
		fma32(0x1.ffffecp-1, b, 1))
	return float32(math.Ldexp(float64(j), int(n))) // VSCALEFPS: one rounding
}
