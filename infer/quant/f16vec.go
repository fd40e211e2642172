package quant

// Vector helpers for attention over an f16 KV cache: the scores of one
// query against many keys, and the probability-weighted sum of many values.
// Products and sums are f32, as in ggml_vec_dot_f16 and its f16 axpy.

// DotsF16 sets out[t] = Σ_d x[d]·h[t·stride + d] for t < len(out) and
// d < len(x), h holding f16 bits. It panics if h is too short.
func DotsF16(x []float32, h []uint16, stride int, out []float32) {
	if len(out) == 0 || len(x) == 0 {
		clear(out)
		return
	}
	h = h[:(len(out)-1)*stride+len(x)] // bounds check once
	if dotsF16SIMD(x, h, stride, out) {
		return
	}
	for t := range out {
		row := h[t*stride : t*stride+len(x)]
		var s float32
		for d, v := range x {
			s += v * F16ToF32(row[d])
		}
		out[t] = s
	}
}

// AxpysF16 adds Σ_t a[t]·h[t·stride + d] to y[d] for t < len(a) and
// d < len(y), h holding f16 bits, one row of h at a time. It panics if h is
// too short.
func AxpysF16(a []float32, h []uint16, stride int, y []float32) {
	if len(a) == 0 || len(y) == 0 {
		return
	}
	h = h[:(len(a)-1)*stride+len(y)]
	if axpysF16SIMD(a, h, stride, y) {
		return
	}
	for t, p := range a {
		row := h[t*stride : t*stride+len(y)]
		for d, v := range row {
			y[d] += p * F16ToF32(v)
		}
	}
}
