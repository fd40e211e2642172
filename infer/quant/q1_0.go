package quant

import "encoding/binary"

// Q1_0: blocks of 128 as { f16 d; u8 qs[16] }; element j is bit j%8 of
// qs[j/8] (LSB first), x = bit ? +d : −d.
const (
	qk1_0     = 128
	q1_0Bytes = 18
)

func dequantizeQ1_0(src []byte, dst []float32) {
	for b := 0; b*qk1_0 < len(dst); b++ {
		blk := src[b*q1_0Bytes:]
		d := f16at(blk, 0)
		for j := 0; j < qk1_0; j++ {
			if blk[2+j/8]>>(j%8)&1 != 0 {
				dst[b*qk1_0+j] = d
			} else {
				dst[b*qk1_0+j] = -d
			}
		}
	}
}

// quantizeQ1_0 is quantize_row_q1_0_ref: d = mean |x| over the block,
// bit = x ≥ 0.
func quantizeQ1_0(src []float32, dst []byte) {
	for b := 0; b*qk1_0 < len(src); b++ {
		x := src[b*qk1_0 : (b+1)*qk1_0]
		var sumAbs float32
		for _, v := range x {
			sumAbs += abs32(v)
		}
		blk := dst[b*q1_0Bytes : (b+1)*q1_0Bytes]
		binary.LittleEndian.PutUint16(blk, F32ToF16(sumAbs/qk1_0))
		clear(blk[2:])
		for j, v := range x {
			if v >= 0 {
				blk[2+j/8] |= 1 << (j % 8)
			}
		}
	}
}

// dotQ1_0 is ggml_vec_dot_q1_0_q8_0 as its AVX2 code sums (the x86 build
// llama.cpp runs, for one token and for prompts alike: no tinyBLAS or
// repacked path takes Q1_0 there): eight lanes, lane l holding elements
// 4l…4l+3 of each Q8_0 sub-block k of a block. The integer sums s_k[l] are
// exact, and so is each d_xk·s_k[l] (11 × 9 significant bits), so ggml's
// mul and FMAs round as adds: per block blk[l] = ((p_0 + p_1) + p_2) + p_3
// with p_k = d_xk·s_k[l], then acc[l] = fma(d_w, blk[l], acc[l]); the lanes
// reduce as hsum_float_8 (sumLanes8). The SIMD kernels (asm/q1_0.go) look
// the p_k up in per-token tables instead and give the same bits; on arm64
// dotQ1_0 is NEON (q1_0_arm64.s), the same steps.
func dotQ1_0Go(n int, w, x []byte) float32 {
	var acc [8]float32
	for b := 0; b < n/qk1_0; b++ {
		wb := w[b*q1_0Bytes:]
		var blk [8]float32
		for k := 0; k < 4; k++ {
			xb := x[(4*b+k)*q8_0Bytes:]
			dx := f16at(xb, 0)
			for l := 0; l < 8; l++ {
				var s int32
				for j := 4 * l; j < 4*l+4; j++ {
					q := int32(int8(xb[2+j]))
					if wb[2+4*k+j/8]>>(j%8)&1 != 0 {
						s += q
					} else {
						s -= q
					}
				}
				if k == 0 {
					blk[l] = dx * float32(s)
				} else {
					blk[l] = fma32(dx, float32(s), blk[l])
				}
			}
		}
		dw := f16at(wb, 0)
		for l := range acc {
			acc[l] = fma32(dw, blk[l], acc[l])
		}
	}
	return sumLanes8(&acc)
}
