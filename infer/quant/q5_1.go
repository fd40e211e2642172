package quant

import "encoding/binary"

// Q5_1: blocks of 32 as { f16 d; f16 m; u8 qh[4]; u8 qs[16] }, the codes as
// Q5_0's; x = d·q + m.
const q5_1Bytes = 24

func dequantizeQ5_1(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q5_1Bytes:]
		d, m := f16at(blk, 0), f16at(blk, 2)
		for j := 0; j < 32; j++ {
			dst[b*32+j] = float32(float32(q5Code(blk, 4, j))*d) + m // as dequantizeQ4_1
		}
	}
}

// quantizeQ5_1 is quantize_row_q5_1_ref: d = (max − min)/31, m = min, q =
// trunc((x − min)/d + 0.5), unclamped as in ggml.
func quantizeQ5_1(src []float32, dst []byte) {
	for b := 0; b*32 < len(src); b++ {
		x := src[b*32 : (b+1)*32]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*q5_1Bytes:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
		var q [32]uint8
		for j, v := range x {
			q[j] = uint8(int32(float32((v-lo)*id) + 0.5))
		}
		putQ5(blk, 4, &q)
	}
}

// dotQ5_1 is ggml_vec_dot_q5_1_q8_1's AVX2 order: dotQ5_0's eight lanes of
// fma(d_w·d_x, float(lane sum), acc[l]), and beside them summs =
// fma(m_w, s_x, summs) (GCC contracts ggml's summs += m·s); the result is
// sumLanes8(acc) + summs.
func dotQ5_1(n int, w, x []byte) float32 {
	var acc [8]float32
	var summs float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q5_1Bytes:], x[b*q8_1Bytes:]
		summs = fma32(f16at(wb, 2), f16at(xb, 2), summs)
		d := f16at(wb, 0) * f16at(xb, 0)
		for l := 0; l < 8; l++ {
			var s int32
			for j := 4 * l; j < 4*l+4; j++ {
				s += int32(q5Code(wb, 4, j)) * int32(int8(xb[4+j]))
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return sumLanes8(&acc) + summs
}
