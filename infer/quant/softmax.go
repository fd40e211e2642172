package quant

import "math"

// SoftmaxF16 replaces the attention scores s by softmax(scale·s), each
// weight rounded to f16, exactly as llama.cpp's x86 build computes it
// (soft_max with ggml_v_expf, then the f16 weights its f16 V product
// reads): the max, e = ExpF(scale·s − max), their sum per chunk of 16 in
// _mm512_reduce_add_ps order accumulated in f64, then e · f32(1/sum).
func SoftmaxF16(s []float32, scale float32) {
	if softmaxF16SIMD(s, scale) {
		return
	}
	softmaxF16Go(s, scale)
}

func softmaxF16Go(s []float32, scale float32) {
	maxScore := float32(math.Inf(-1))
	for t, v := range s {
		v *= scale
		s[t] = v
		maxScore = max(maxScore, v)
	}
	var sum float64
	var chunk [16]float32
	for c := 0; c < len(s); c += 16 {
		clear(chunk[:])
		for l := range min(16, len(s)-c) {
			e := ExpF(s[c+l] - maxScore)
			s[c+l] = e
			chunk[l] = e
		}
		sum += float64(Reduce16(&chunk))
	}
	inv := float32(1 / sum)
	for t, e := range s {
		s[t] = RoundF16(e * inv)
	}
}
