package quant

import (
	"encoding/binary"
	"math"
)

// Q8_0: blocks of 32 as { f16 d; i8 qs[32] }, x = d·q.
const (
	qk8_0      = 32
	q8_0Bytes  = 34
	qkK        = 256 // K-quant super-block
	q8_KBytes  = 292 // { f32 d; i8 qs[256]; i16 bsums[16] }
	q8_KBsums  = 4 + qkK
	q4_KBytes  = 144
	q5_KBytes  = 176
	q6_KBytes  = 210
	groupMaxEp = 1e-15 // ggml's GROUP_MAX_EPS
)

func dequantizeQ8_0(src []byte, dst []float32) {
	for b := 0; b*qk8_0 < len(dst); b++ {
		blk := src[b*q8_0Bytes:]
		d := f16at(blk, 0)
		for j := 0; j < qk8_0; j++ {
			dst[b*qk8_0+j] = float32(int8(blk[2+j])) * d
		}
	}
}

// quantizeQ8_0Ref is quantize_row_q8_0_ref: id = 1/d, roundf (half away
// from zero).
func quantizeQ8_0Ref(src []float32, dst []byte) {
	for b := 0; b*qk8_0 < len(src); b++ {
		x := src[b*qk8_0 : (b+1)*qk8_0]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*q8_0Bytes:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j, v := range x {
			blk[2+j] = byte(int8(math.Round(float64(v * id))))
		}
	}
}

// quantizeQ8_0X86 is ggml-cpu's AVX quantize_row_q8_0: id = 127/amax and
// _mm256_round_ps(_MM_ROUND_NEAREST), i.e. round half to even. It quantizes
// the activations of every Q1_0/Q2_0/Q4_0/Q8_0 dot product on x86.
func quantizeQ8_0X86(src []float32, dst []byte) {
	if quantizeQ8_0SIMD(src, dst) {
		return
	}
	quantizeQ8_0X86Go(src, dst)
}

func quantizeQ8_0X86Go(src []float32, dst []byte) {
	for b := 0; b*qk8_0 < len(src); b++ {
		x := (*[qk8_0]float32)(src[b*qk8_0:])
		blk := (*[q8_0Bytes]byte)(dst[b*q8_0Bytes:])
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		binary.LittleEndian.PutUint16(blk[:], F32ToF16(amax/127))
		for j, v := range x {
			blk[2+j] = byte(roundHalfEven(v * id))
		}
	}
}

// roundHalfEven rounds |f| < 2²² to the nearest integer, ties to even, with
// the float trick ggml's nearest_int uses: adding 1.5·2²³ leaves the rounded
// integer in the low mantissa bits. The product is rounded to float32 first
// (the conversion forbids fusing it into an FMA), as in the C code.
func roundHalfEven(f float32) int32 {
	return int32(math.Float32bits(float32(f)+12582912)&0x7fffff) - 0x400000
}

func dotQ8_0(n int, w, x []byte) float32 {
	var sumf float32
	for b := 0; b < n/qk8_0; b++ {
		wb, xb := w[b*q8_0Bytes:], x[b*q8_0Bytes:]
		var sumi int32
		for j := 0; j < qk8_0; j++ {
			sumi += int32(int8(wb[2+j])) * int32(int8(xb[2+j]))
		}
		sumf += float32(sumi) * (f16at(wb, 0) * f16at(xb, 0))
	}
	return sumf
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// nearestInt is ggml's nearest_int (the 1.5·2²³ trick): round half to even,
// valid for |f| ≤ 2²² as in ggml.
func nearestInt(f float32) int32 { return int32(math.RoundToEven(float64(f))) }
