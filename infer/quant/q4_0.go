package quant

import "encoding/binary"

// Q4_0: blocks of 32 as { f16 d; u8 qs[16] }; element j < 16 is the low
// nibble of qs[j], element j+16 its high nibble; x = d·(q − 8).
const q4_0Bytes = 18

func dequantizeQ4_0(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q4_0Bytes:]
		d := f16at(blk, 0)
		for j := 0; j < 16; j++ {
			dst[b*32+j] = float32(int32(blk[2+j]&0xf)-8) * d
			dst[b*32+j+16] = float32(int32(blk[2+j]>>4)-8) * d
		}
	}
}

// quantizeQ4_0 is quantize_row_q4_0_ref: d = max/−8 where max is the value
// of largest magnitude, q = min(15, trunc(x/d + 8.5)).
func quantizeQ4_0(src []float32, dst []byte) {
	for b := 0; b*32 < len(src); b++ {
		x := src[b*32 : (b+1)*32]
		var amax, mx float32
		for _, v := range x {
			if amax < abs32(v) {
				amax, mx = abs32(v), v
			}
		}
		d := mx / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*q4_0Bytes:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j := 0; j < 16; j++ {
			lo := min(15, uint8(int8(float32(x[j]*id)+8.5)))
			hi := min(15, uint8(int8(float32(x[j+16]*id)+8.5)))
			blk[2+j] = lo | hi<<4
		}
	}
}

func dotQ4_0(n int, w, x []byte) float32 {
	var sumf float32
	for b := 0; b < n/32; b++ {
		wb, xb := w[b*q4_0Bytes:], x[b*q8_0Bytes:]
		var sumi int32
		for j := 0; j < 16; j++ {
			sumi += (int32(wb[2+j]&0xf) - 8) * int32(int8(xb[2+j]))
			sumi += (int32(wb[2+j]>>4) - 8) * int32(int8(xb[2+j+16]))
		}
		sumf += float32(sumi) * (f16at(wb, 0) * f16at(xb, 0))
	}
	return sumf
}
