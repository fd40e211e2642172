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

// dotQ1_0 is ggml_vec_dot_q1_0_q8_0: per Q8_0 sub-block k an integer sum of
// ±q, times d_x[k] in float; the four summed, times d_w.
func dotQ1_0(n int, w, x []byte) float32 {
	var sumf float32
	for b := 0; b < n/qk1_0; b++ {
		wb := w[b*q1_0Bytes:]
		var sumBlock float32
		for k := 0; k < 4; k++ {
			xb := x[(4*b+k)*q8_0Bytes:]
			var sumi int32
			for j := 0; j < 32; j++ {
				q := int32(int8(xb[2+j]))
				if wb[2+4*k+j/8]>>(j%8)&1 != 0 {
					sumi += q
				} else {
					sumi -= q
				}
			}
			sumBlock += f16at(xb, 0) * float32(sumi)
		}
		sumf += f16at(wb, 0) * sumBlock
	}
	return sumf
}
