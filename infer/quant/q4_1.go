package quant

import "encoding/binary"

// Q4_1: blocks of 32 as { f16 d; f16 m; u8 qs[16] }; element j < 16 is the
// low nibble of qs[j], element j+16 its high nibble; x = d·q + m.
const q4_1Bytes = 20

func dequantizeQ4_1(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q4_1Bytes:]
		d, m := f16at(blk, 0), f16at(blk, 2)
		for j := 0; j < 16; j++ {
			// Rounded products, as ggml-base (no FMA) computes them, on
			// every architecture.
			dst[b*32+j] = float32(float32(blk[4+j]&0xf)*d) + m
			dst[b*32+j+16] = float32(float32(blk[4+j]>>4)*d) + m
		}
	}
}

// minMax is the block's smallest and largest value, as the _1 reference
// quantizers find them (from ±FLT_MAX, strict comparisons).
func minMax(x []float32) (lo, hi float32) {
	lo, hi = maxFloat32, -maxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

const maxFloat32 = 0x1p127 * (1 + (1 - 0x1p-23))

// quantizeQ4_1 is quantize_row_q4_1_ref: d = (max − min)/15, m = min, q =
// min(15, trunc((x − min)/d + 0.5)).
func quantizeQ4_1(src []float32, dst []byte) {
	for b := 0; b*32 < len(src); b++ {
		x := src[b*32 : (b+1)*32]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*q4_1Bytes:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
		for j := 0; j < 16; j++ {
			q0 := min(15, uint8(int8(float32((x[j]-lo)*id)+0.5)))
			q1 := min(15, uint8(int8(float32((x[j+16]-lo)*id)+0.5)))
			blk[4+j] = q0 | q1<<4
		}
	}
}

// dotQ4_1 is ggml_vec_dot_q4_1_q8_1's AVX2 order, as dotQ5_1's.
func dotQ4_1(n int, w, x []byte) float32 {
	var acc [8]float32
	var summs float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q4_1Bytes:], x[b*q8_1Bytes:]
		summs = fma32(f16at(wb, 2), f16at(xb, 2), summs)
		d := f16at(wb, 0) * f16at(xb, 0)
		for l := 0; l < 8; l++ {
			var s int32
			for j := 4 * l; j < 4*l+4; j++ {
				s += int32(q4Code(wb[2:], j)) * int32(int8(xb[4+j]))
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return sumLanes8(&acc) + summs
}
