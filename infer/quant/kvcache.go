package quant

// Kernels of llama.cpp's CPU flash attention over a Q8_0 KV cache
// (ggml_compute_forward_flash_attn_ext_f16 with a Q8_0 K or V): each key
// row meets the query quantized to Q8_0 (QuantizeActivations) in
// ggml_vec_dot_q8_0_q8_0, and each value row is expanded to f32
// (dequantize_row_q8_0) and added into an f32 accumulator with one FMA per
// element (ggml_vec_mad_f32).

// Q8_0RowBytes is the size of n values (a multiple of 32) as Q8_0.
func Q8_0RowBytes(n int) int { return n / qk8_0 * q8_0Bytes }

// DotQ8_0 is ggml_vec_dot_q8_0_q8_0 on x86 with AVX2 (the path its AVX-512
// builds take too) over len(x)/34 blocks: eight f32 lanes, lane l holding
// the integer sum of elements 4l…4l+3 of each block, acc[l] = fma(d_x·d_y,
// sum, acc[l]), then hsum_float_8. The sums of four int8 products are exact
// in f32, so the order of the float operations is all that matters. y must
// be at least as long as x.
func DotQ8_0(x, y []byte) float32 {
	var acc [8]float32
	y = y[:len(x)]
	for len(x) >= q8_0Bytes {
		xb, yb := (*[q8_0Bytes]byte)(x), (*[q8_0Bytes]byte)(y)
		d := f16at(xb[:], 0) * f16at(yb[:], 0)
		for l := range acc {
			var s int32
			for j := 2 + 4*l; j < 6+4*l; j++ {
				s += int32(int8(xb[j])) * int32(int8(yb[j]))
			}
			acc[l] = FMA32(d, float32(s), acc[l])
		}
		x, y = x[q8_0Bytes:], y[q8_0Bytes:]
	}
	return sumLanes8(&acc)
}

// MadQ8_0 sets acc[i] = fma(x_i, w, acc[i]) for the len(acc) values x of
// the Q8_0 row x (x_i = d·q_i rounded to f32, as dequantize_row_q8_0):
// ggml_vec_mad_f32 of a dequantized value row.
func MadQ8_0(acc []float32, x []byte, w float32) {
	for len(acc) >= qk8_0 {
		blk := (*[q8_0Bytes]byte)(x)
		d := f16at(blk[:], 0)
		a := (*[qk8_0]float32)(acc)
		for j := range a {
			a[j] = FMA32(float32(int8(blk[2+j]))*d, w, a[j])
		}
		acc, x = acc[qk8_0:], x[q8_0Bytes:]
	}
}
