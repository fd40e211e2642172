package quant

import "math"

// Kernels of llama.cpp's CPU flash attention over a Q8_0 KV cache
// (ggml_compute_forward_flash_attn_ext_f16 with a Q8_0 K or V): each key
// row meets the query quantized to Q8_0 (QuantizeActivations) in
// ggml_vec_dot_q8_0_q8_0, and each value row is expanded to f32
// (DequantizeQ8_0) for the FMA per element of ggml_vec_mad_f32.

// DotQ8_0 is ggml_vec_dot_q8_0_q8_0 on x86 with AVX2 (the path its AVX-512
// builds take too) over len(x)/34 blocks: eight f32 lanes, lane l holding
// the integer sum of elements 4l…4l+3 of each block, acc[l] = fma(d_x·d_y,
// sum, acc[l]), then hsum_float_8. The sums of four int8 products are exact
// in f32, so the order of the float operations is all that matters. y must
// be at least as long as x.
func DotQ8_0(x, y []byte) float32 {
	x = x[:len(x)/q8_0Bytes*q8_0Bytes]
	y = y[:len(x)]
	if s, ok := dotQ8_0SIMD(x, y); ok {
		return s
	}
	return dotQ8_0Go(x, y)
}

func dotQ8_0Go(x, y []byte) float32 {
	var acc [8]float32
	for len(x) >= q8_0Bytes {
		xb, yb := (*[q8_0Bytes]byte)(x), (*[q8_0Bytes]byte)(y)
		d := f16at(xb[:], 0) * f16at(yb[:], 0)
		for l := range acc {
			j := 2 + 4*l
			s := int32(int8(xb[j]))*int32(int8(yb[j])) + int32(int8(xb[j+1]))*int32(int8(yb[j+1])) +
				int32(int8(xb[j+2]))*int32(int8(yb[j+2])) + int32(int8(xb[j+3]))*int32(int8(yb[j+3]))
			// FMA32's fast path, inline: one f64 FMA rounded to f32
			// unless it landed on an f32 midpoint.
			if f := math.FMA(float64(d), float64(s), float64(acc[l])); math.Abs(f) >= 0x1p-126 && !halfwayF32(f) {
				acc[l] = float32(f)
			} else {
				acc[l] = FMA32(d, float32(s), acc[l])
			}
		}
		x, y = x[q8_0Bytes:], y[q8_0Bytes:]
	}
	return sumLanes8(&acc)
}

// DequantizeQ8_0 expands the Q8_0 row x into len(dst) values, d·q rounded
// to f32 (dequantize_row_q8_0).
func DequantizeQ8_0(x []byte, dst []float32) {
	for len(dst) >= qk8_0 {
		blk := (*[q8_0Bytes]byte)(x)
		d := f16at(blk[:], 0)
		out := (*[qk8_0]float32)(dst)
		for j := range out {
			out[j] = float32(int8(blk[2+j])) * d
		}
		dst, x = dst[qk8_0:], x[q8_0Bytes:]
	}
}
