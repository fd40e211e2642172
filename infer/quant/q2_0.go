package quant

import (
	"encoding/binary"
	"math"
)

// Q2_0 (ggml id 42, upstream): blocks of 64 as { f16 d; u8 qs[16] }; element
// j is bits 2·(j%4) of qs[j/4], x = d·(q − 1), codes 00/01/10/11 → −1, 0,
// +1, +2. The legacy Prism layout (Q2_0G128) is the same codec with 128
// elements in { f16 d; u8 qs[32] }.
const (
	q2_0Bytes     = 18
	q2_0G128Bytes = 34
)

func dequantizeQ2(src []byte, dst []float32, qk, blockBytes int) {
	for b := 0; b*qk < len(dst); b++ {
		blk := src[b*blockBytes:]
		d := f16at(blk, 0)
		for j := 0; j < qk; j++ {
			q := int32(blk[2+j/4]>>(2*(j%4))) & 3
			dst[b*qk+j] = float32(q-1) * d
		}
	}
}

// quantizeQ2 follows the upstream reference: d = max |x|,
// q = clamp(roundf(x/d) + 1, 0, 3), so ternary inputs stay exact.
func quantizeQ2(src []float32, dst []byte, qk, blockBytes int) {
	for b := 0; b*qk < len(src); b++ {
		x := src[b*qk : (b+1)*qk]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		var id float32
		if amax != 0 {
			id = 1 / amax
		}
		blk := dst[b*blockBytes : (b+1)*blockBytes]
		binary.LittleEndian.PutUint16(blk, F32ToF16(amax))
		clear(blk[2:])
		for j, v := range x {
			q := min(3, max(0, int32(math.Round(float64(v*id)))+1))
			blk[2+j/4] |= byte(q) << (2 * (j % 4))
		}
	}
}

// dotQ2 is ggml_vec_dot_q2_0_q8_0's order: integer sums of (q−1)·y per Q8_0
// sub-block, times d_x in float, summed over the block, times d_w.
func dotQ2(n int, w, x []byte, qk, blockBytes int) float32 {
	var sumf float32
	for b := 0; b < n/qk; b++ {
		wb := w[b*blockBytes:]
		var sumBlock float32
		for k := 0; k < qk/32; k++ {
			xb := x[(qk/32*b+k)*q8_0Bytes:]
			var sumi int32
			for j := 0; j < 32; j++ {
				e := 32*k + j
				q := int32(wb[2+e/4]>>(2*(e%4))) & 3
				sumi += (q - 1) * int32(int8(xb[2+j]))
			}
			sumBlock += f16at(xb, 0) * float32(sumi)
		}
		sumf += f16at(wb, 0) * sumBlock
	}
	return sumf
}

func dequantizeQ2_0(src []byte, dst []float32) { dequantizeQ2(src, dst, 64, q2_0Bytes) }
func quantizeQ2_0(src []float32, dst []byte)   { quantizeQ2(src, dst, 64, q2_0Bytes) }
func dotQ2_0(n int, w, x []byte) float32       { return dotQ2(n, w, x, 64, q2_0Bytes) }

func dequantizeQ2_0G128(src []byte, dst []float32) { dequantizeQ2(src, dst, 128, q2_0G128Bytes) }
func quantizeQ2_0G128(src []float32, dst []byte)   { quantizeQ2(src, dst, 128, q2_0G128Bytes) }
func dotQ2_0G128(n int, w, x []byte) float32       { return dotQ2(n, w, x, 128, q2_0G128Bytes) }
