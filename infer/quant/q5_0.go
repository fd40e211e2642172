package quant

import "encoding/binary"

// Q5_0: blocks of 32 as { f16 d; u8 qh[4]; u8 qs[16] }; element j < 16 is
// the low nibble of qs[j] with bit j of qh (the u32) as its fifth bit,
// element j+16 the high nibble with bit j+16; x = d·(q − 16).
const q5_0Bytes = 22

// q5Code is element j of a Q5_0 or Q5_1 block whose qh starts at h (qs
// follows it).
func q5Code(blk []byte, h, j int) byte {
	qh := binary.LittleEndian.Uint32(blk[h:])
	hi := byte(qh>>j&1) << 4
	if j < 16 {
		return blk[h+4+j]&0xf | hi
	}
	return blk[h+4+j-16]>>4 | hi
}

func dequantizeQ5_0(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q5_0Bytes:]
		d := f16at(blk, 0)
		for j := 0; j < 32; j++ {
			dst[b*32+j] = float32(int32(q5Code(blk, 2, j))-16) * d
		}
	}
}

// putQ5 stores the 32 five-bit codes q as qh (at h) and the nibbles after
// it.
func putQ5(blk []byte, h int, q *[32]uint8) {
	var qh uint32
	for j := 0; j < 16; j++ {
		blk[h+4+j] = q[j]&0xf | (q[j+16]&0xf)<<4
		qh |= uint32(q[j]>>4&1)<<j | uint32(q[j+16]>>4&1)<<(j+16)
	}
	binary.LittleEndian.PutUint32(blk[h:], qh)
}

// quantizeQ5_0 is quantize_row_q5_0_ref: d = max/−16 where max is the
// value of largest magnitude, q = min(31, trunc(x/d + 16.5)).
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
		var q [32]uint8
		for j, v := range x {
			q[j] = min(31, uint8(int8(float32(v*id)+16.5)))
		}
		putQ5(blk, 2, &q)
	}
}

// dotQ5_0 is ggml_vec_dot_q5_0_q8_0's AVX2 order, which tinyBLAS's
// prompt products share: eight f32 lanes, lane l holding elements 4l…4l+3
// of each block; acc[l] = fma(d_w·d_x, float(lane sum), acc[l]); the lanes
// reduce as hsum_float_8 (sumLanes8).
func dotQ5_0(n int, w, x []byte) float32 {
	var acc [8]float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q5_0Bytes:], x[b*q8_0Bytes:]
		d := f16at(wb, 0) * f16at(xb, 0)
		for l := 0; l < 8; l++ {
			var s int32
			for j := 4 * l; j < 4*l+4; j++ {
				s += (int32(q5Code(wb, 2, j)) - 16) * int32(int8(xb[2+j]))
			}
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return sumLanes8(&acc)
}
