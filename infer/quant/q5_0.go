package quant

import "encoding/binary"

// Q5_0: blocks of 32 as { f16 d; u8 qh[4]; u8 qs[16] }; element j < 16 is
// the low nibble of qs[j], element j+16 its high nibble, each with bit j
// (j+16) of the little-endian qh as its fifth bit; x = d·(q − 16).
// llama-quantize stores Q4_K weights whose rows are no multiple of 256 in
// it (Gemma 3 1B's 1152-wide ones in a Q4_K_M file).
const q5_0Bytes = 22

// q5Code is the 5-bit code of element j of a Q5_0 block.
func q5Code(blk []byte, j int) byte {
	qh := binary.LittleEndian.Uint32(blk[2:])
	hi := byte(qh>>j&1) << 4
	if j < 16 {
		return blk[6+j]&0xf | hi
	}
	return blk[6+j-16]>>4 | hi
}

func dequantizeQ5_0(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q5_0Bytes:]
		d := f16at(blk, 0)
		for j := 0; j < 32; j++ {
			dst[b*32+j] = float32(int32(q5Code(blk, j))-16) * d
		}
	}
}

// quantizeQ5_0 is quantize_row_q5_0_ref: d = max/−16 where max is the value
// of largest magnitude, q = min(31, trunc(x/d + 16.5)).
func quantizeQ5_0(src []float32, dst []byte) {
	for b := 0; b*32 < len(src); b++ {
		x := src[b*32 : (b+1)*32]
		var amax, mx float32
		for _, v := range x {
			if amax < abs32(v) {
				amax, mx = abs32(v), v
			}
		}
		d := mx / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*q5_0Bytes:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		var qh uint32
		for j := 0; j < 16; j++ {
			lo := min(31, uint8(int8(float32(x[j]*id)+16.5)))
			hi := min(31, uint8(int8(float32(x[j+16]*id)+16.5)))
			blk[6+j] = lo&0xf | hi<<4
			qh |= uint32(lo>>4)<<j | uint32(hi>>4)<<(j+16)
		}
		binary.LittleEndian.PutUint32(blk[2:], qh)
	}
}

// dotQ5_0 is ggml_vec_dot_q5_0_q8_0 on x86 with AVX2, which its AVX-512
// builds and tinyBLAS's Q5_0 gemm (llamafile_sgemm, for any token count)
// share: eight f32 lanes, lane l holding the exact integer sum of elements
// 4l…4l+3 of each block, acc[l] = fma(d_w·d_x, sum, acc[l]), then
// hsum_float_8.
func dotQ5_0(n int, w, x []byte) float32 {
	var acc [8]float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q5_0Bytes:], x[b*q8_0Bytes:]
		d := f16at(wb, 0) * f16at(xb, 0)
		for l := range acc {
			var s int32
			for e := 4 * l; e < 4*l+4; e++ {
				s += (int32(q5Code(wb, e)) - 16) * int32(int8(xb[2+e]))
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return sumLanes8(&acc)
}
