package quant

import (
	"encoding/binary"
	"math"
)

// Plain float types: one element per block, little-endian.

func le16(b []byte, i int) uint16 { return binary.LittleEndian.Uint16(b[i:]) }

func f16at(b []byte, i int) float32 { return F16ToF32(le16(b, i)) }

func f32at(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[i:])) }

func dequantizeF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = f32at(src, 4*i)
	}
}

func quantizeF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantizeF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = f16at(src, 2*i)
	}
}

func quantizeF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func dequantizeBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToF32(le16(src, 2*i))
	}
}

func quantizeBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}

// llama.cpp's x86 CPU build (the AVX-512 BF16 variant it picks on Zen 4
// and Sapphire Rapids) computes float matrix products in one order for a
// single token (ggml_vec_dot_f32/f16/bf16) and in another for two or more
// (tinyBLAS, when the row length is a multiple of its vector), so bonsai
// has both: dotF32/dotF16/dotBF16 for one token, gemmF32/gemmF16/gemmBF16
// for more (traits.batchDot). Products of two f16 or two bf16 values are exact in float32,
// so the fused multiply-adds of the SIMD code round as the plain adds
// below do (and a compiler that fuses them changes nothing).

// dotF32 is ggml_vec_dot_f32 on AVX-512: four accumulators of 16 lanes take
// the four 16-element chunks of each 64 elements by fused multiply-adds;
// then (a0 + a2) + (a1 + a3) lane by lane and the tree of
// _mm512_reduce_add_ps; the last n mod 64 products are fused into the
// float32 sum one by one.
func dotF32(n int, w, x []byte) float32 {
	var acc [4][16]float32
	np := n - n%64
	for i := 0; i < np; i++ {
		a := &acc[i/16%4]
		a[i%16] = fma32(f32at(w, 4*i), f32at(x, 4*i), a[i%16])
	}
	var s [16]float32
	for l := range s {
		s[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	sumf := Reduce16(&s)
	for i := np; i < n; i++ {
		sumf = fma32(f32at(w, 4*i), f32at(x, 4*i), sumf)
	}
	return sumf
}

// gemmF32 is tinyBLAS's f32 dot on AVX-512 (n a multiple of 16): 16 lanes,
// lane l taking elements l, l+16, … by fused multiply-adds, then the tree
// of _mm512_reduce_add_ps.
func gemmF32(n int, w, x []byte) float32 {
	var lanes [16]float32
	for i := 0; i < n; i++ {
		lanes[i%16] = fma32(f32at(w, 4*i), f32at(x, 4*i), lanes[i%16])
	}
	return Reduce16(&lanes)
}

// dotF16 is ggml_vec_dot_f16 on AVX-512: four accumulators of 16 lanes take
// the four 16-element chunks of each 64 elements by fused multiply-adds;
// then (a0 + a2) + (a1 + a3) lane by lane and the tree of
// _mm512_reduce_add_ps; the last n mod 64 products are added in float64.
func dotF16(n int, w, x []byte) float32 {
	var acc [4][16]float32
	np := n - n%64
	for i := 0; i < np; i++ {
		a := &acc[i/16%4]
		a[i%16] += f16at(w, 2*i) * f16at(x, 2*i)
	}
	var s [16]float32
	for l := range s {
		s[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	sumf := float64(Reduce16(&s))
	for i := np; i < n; i++ {
		sumf += float64(f16at(w, 2*i) * f16at(x, 2*i))
	}
	return float32(sumf)
}

// gemmF16 is tinyBLAS's f16 dot on AVX-512 (n a multiple of 16): 16 lanes,
// lane l taking elements l, l+16, … by fused multiply-adds, then the tree
// of _mm512_reduce_add_ps.
func gemmF16(n int, w, x []byte) float32 {
	var lanes [16]float32
	for i := 0; i < n; i++ {
		lanes[i%16] += f16at(w, 2*i) * f16at(x, 2*i)
	}
	return Reduce16(&lanes)
}

// dpbf16 is VDPBF16PS on 32 elements from i: lane j adds the product of
// element i+2j+1, then that of element i+2j, each rounded once. Unlike the
// instruction it keeps subnormals (no DAZ/FTZ), which activations never
// reach.
func dpbf16(lanes *[16]float32, w, x []byte, i int) {
	bf := func(b []byte, i int) float32 { return BF16ToF32(le16(b, 2*i)) }
	for j := range lanes {
		k := i + 2*j
		lanes[j] += bf(w, k+1) * bf(x, k+1)
		lanes[j] += bf(w, k) * bf(x, k)
	}
}

// dotBF16 is ggml_vec_dot_bf16 on AVX-512 BF16: two accumulators take the
// two 32-element halves of each 64 elements by dpbf16; their trees are
// added in float64, then the last n mod 64 products.
func dotBF16(n int, w, x []byte) float32 {
	var c1, c2 [16]float32
	np := n - n%64
	for i := 0; i < np; i += 64 {
		dpbf16(&c1, w, x, i)
		dpbf16(&c2, w, x, i+32)
	}
	sumf := float64(Reduce16(&c1)) + float64(Reduce16(&c2))
	for i := np; i < n; i++ {
		sumf += float64(BF16ToF32(le16(w, 2*i)) * BF16ToF32(le16(x, 2*i)))
	}
	return float32(sumf)
}

// gemmBF16 is tinyBLAS's bf16 dot on AVX-512 BF16 (n a multiple of 32): one
// accumulator by dpbf16, then the tree of _mm512_reduce_add_ps.
func gemmBF16(n int, w, x []byte) float32 {
	var lanes [16]float32
	for i := 0; i < n; i += 32 {
		dpbf16(&lanes, w, x, i)
	}
	return Reduce16(&lanes)
}

// gemmDot is a type's dot product for products of two or more tokens, used
// when the row length is a multiple of block (else llama.cpp stays with
// its one-token dot).
type gemmDot struct {
	block int
	dot   func(n int, w, x []byte) float32
}
