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

// The same for a single query token. llama.cpp hands products of two or
// more tokens to tinyBLAS, but tinyBLAS declines one (n < 2), and ggml's
// own ggml_vec_dot_f16 (AVX-512 without AVX512-FP16) then computes each
// score and each output of a decode step: four 16-lane accumulators,
// accumulator j taking elements 64c+16j … 64c+16j+15 of each chunk c of 64
// in order; then a0+a2 and a1+a3 lane by lane, their sum, the pairwise tree
// of _mm512_reduce_add_ps, and the n mod 64 elements left over added one
// by one in f64.

// DotsF16Vec is DotsF16 in ggml_vec_dot_f16's order (the lanes run over d).
func DotsF16Vec(x []float32, h []uint16, stride int, out []float32) {
	if len(out) == 0 {
		return
	}
	h = h[:(len(out)-1)*stride+len(x)]
	if !dotsF16VecSIMD(x, h, stride, out) {
		dotsF16VecGo(x, h, stride, out)
	}
}

func dotsF16VecGo(x []float32, h []uint16, stride int, out []float32) {
	np := len(x) &^ 63
	for t := range out {
		row := h[t*stride : t*stride+len(x)]
		var acc [4][16]float32
		for d, v := range x[:np] {
			acc[d%64/16][d%16] = fma32(v, F16ToF32(row[d]), acc[d%64/16][d%16])
		}
		sum := float64(reduceVec(&acc))
		for d := np; d < len(x); d++ {
			sum += float64(x[d] * F16ToF32(row[d]))
		}
		out[t] = float32(sum)
	}
}

// WeightedSumF16Vec is WeightedSumF16 in ggml_vec_dot_f16's order (the
// lanes run over t). llama.cpp's product runs over its padded KV length, a
// multiple of 256 whose positions past the sequence hold zeros with weight
// 0: every t falls in a whole chunk of 64 and nothing is left over.
func WeightedSumF16Vec(p []float32, h []uint16, stride int, out []float32) {
	if len(p) == 0 {
		clear(out)
		return
	}
	h = h[:(len(p)-1)*stride+len(out)]
	if !weightedSumF16VecSIMD(p, h, stride, out) {
		weightedSumF16VecGo(p, h, stride, out)
	}
}

func weightedSumF16VecGo(p []float32, h []uint16, stride int, out []float32) {
	for d := range out {
		var acc [4][16]float32
		for t, w := range p {
			acc[t%64/16][t%16] = fma32(w, F16ToF32(h[t*stride+d]), acc[t%64/16][t%16])
		}
		out[d] = reduceVec(&acc)
	}
}

// reduceVec is GGML_F16_VEC_REDUCE on AVX-512: (a0+a2) + (a1+a3) lane by
// lane, then _mm512_reduce_add_ps.
func reduceVec(acc *[4][16]float32) float32 {
	var l [16]float32
	for i := range l {
		l[i] = (acc[0][i] + acc[2][i]) + (acc[1][i] + acc[3][i])
	}
	return Reduce16(&l)
}
