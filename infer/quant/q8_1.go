package quant

import "encoding/binary"

// Q8_1: blocks of 32 as { f16 d; f16 s; i8 qs[32] }, x = d·q and s =
// d·Σq: the activations of Q4_1 and Q5_1 products, whose m·s term stands
// for the weights' offset m times the block's activations.
const q8_1Bytes = 36

func dequantizeQ8_1(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q8_1Bytes:]
		d := f16at(blk, 0)
		for j := 0; j < 32; j++ {
			dst[b*32+j] = float32(int8(blk[4+j])) * d
		}
	}
}

// quantizeQ8_1X86 is ggml-cpu's AVX2 quantize_row_q8_1: the quants and d
// of its Q8_0 quantizer (127/amax, round half to even), and s = f16(d ·
// Σq) with d the float32 amax/127.
func quantizeQ8_1X86(src []float32, dst []byte) {
	var tmp [q8_0Bytes]byte
	for b := 0; b*32 < len(src); b++ {
		x := src[b*32 : (b+1)*32]
		quantizeQ8_0X86(x, tmp[:])
		blk := dst[b*q8_1Bytes:][:q8_1Bytes]
		copy(blk[:2], tmp[:2])
		copy(blk[4:], tmp[2:])
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		var sum int32
		for _, q := range tmp[2:] {
			sum += int32(int8(q))
		}
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(amax/127*float32(sum)))
	}
}

// quantizeQ8_1Ref is quantize_row_q8_1_ref: Q8_0's reference rounding (id
// = 1/d, half away from zero) and s = f16(Σq·d).
func quantizeQ8_1Ref(src []float32, dst []byte) {
	var tmp [q8_0Bytes]byte
	for b := 0; b*32 < len(src); b++ {
		quantizeQ8_0Ref(src[b*32:(b+1)*32], tmp[:])
		blk := dst[b*q8_1Bytes:][:q8_1Bytes]
		copy(blk[:2], tmp[:2])
		copy(blk[4:], tmp[2:])
		var amax float32
		for _, v := range src[b*32 : (b+1)*32] {
			amax = max(amax, abs32(v))
		}
		var sum int32
		for _, q := range tmp[2:] {
			sum += int32(int8(q))
		}
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(float32(sum)*(amax/127)))
	}
}
