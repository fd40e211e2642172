package quant

// Vector helpers for attention over an f16 KV cache, in the order of
// operations of llama.cpp's CPU attention without flash attention (tinyBLAS's
// f16 dot on AVX-512): 16 lanes of fused multiply-adds, lane i taking
// elements i, i+16, i+32, … in order, then the pairwise tree of
// _mm512_reduce_add_ps. The portable and the AVX-512 versions agree to the
// last bit but for the portable FMA's rare double rounding (f64, then f32).

// DotsF16 sets out[t] = Σ_d x[d]·h[t·stride + d] for t < len(out) and
// d < len(x) (the scores of one query against len(out) keys), h holding f16
// bits; the lanes run over d. It panics if h is too short.
func DotsF16(x []float32, h []uint16, stride int, out []float32) {
	if len(out) == 0 {
		return
	}
	h = h[:(len(out)-1)*stride+len(x)] // one bounds check for the kernel
	if dotsF16SIMD(x, h, stride, out) {
		return
	}
	for t := range out {
		row := h[t*stride : t*stride+len(x)]
		var lanes [16]float32
		for d, v := range x {
			lanes[d%16] = fma32(v, F16ToF32(row[d]), lanes[d%16])
		}
		out[t] = Reduce16(&lanes)
	}
}

// WeightedSumF16 sets out[d] = Σ_t p[t]·h[t·stride + d] for t < len(p) and
// d < len(out) (attention's probabilities times the values), h holding f16
// bits; the lanes run over t. It panics if h is too short.
func WeightedSumF16(p []float32, h []uint16, stride int, out []float32) {
	if len(p) == 0 {
		clear(out)
		return
	}
	h = h[:(len(p)-1)*stride+len(out)]
	if weightedSumF16SIMD(p, h, stride, out) {
		return
	}
	for d := range out {
		var lanes [16]float32
		for t, w := range p {
			lanes[t%16] = fma32(w, F16ToF32(h[t*stride+d]), lanes[t%16])
		}
		out[d] = Reduce16(&lanes)
	}
}

// WeightedSumF16T is WeightedSumF16 with h transposed: out[d] = Σ_t
// p[t]·h[d·stride + t] for t < len(p), d < len(out). The lanes (t mod 16)
// and their reduction are WeightedSumF16's, so the result is the same to
// the bit; the reads are contiguous, which a cache of V stored by
// dimension allows. It panics if h is too short.
func WeightedSumF16T(p []float32, h []uint16, stride int, out []float32) {
	if len(p) == 0 {
		clear(out)
		return
	}
	if len(out) == 0 {
		return
	}
	h = h[:(len(out)-1)*stride+len(p)]
	if weightedSumF16TSIMD(p, h, stride, out) {
		return
	}
	for d := range out {
		row := h[d*stride:][:len(p)]
		var lanes [16]float32
		for t, w := range p {
			lanes[t%16] = fma32(w, F16ToF32(row[t]), lanes[t%16])
		}
		out[d] = Reduce16(&lanes)
	}
}

// Reduce16 adds 16 lanes as _mm512_reduce_add_ps does: halves, quarters,
// then (0+2)+(1+3).
func Reduce16(l *[16]float32) float32 {
	var s8 [8]float32
	for i := range s8 {
		s8[i] = l[i] + l[i+8]
	}
	var s4 [4]float32
	for i := range s4 {
		s4[i] = s8[i] + s8[i+4]
	}
	return (s4[0] + s4[2]) + (s4[1] + s4[3])
}
