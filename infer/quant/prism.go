package quant

import (
	"encoding/binary"
	"math"
)

// The Prism types of PrismML's llama.cpp fork, both 128 weights per block
// with one f16 scale:
//
//	PQ2_0 (142):  { f16 d; u8 qs[32] }, the Q2_0 codec at group 128 (the
//	              legacy Q2_0G128 layout under its own id): x = d·(code − 1)
//	PTQ1_0 (143): { u8 qs[24]; u8 qh[2]; f16 d }, d last, trits t ∈ {0,1,2}
//	              packed five to a byte (qh: four): x = d·(t − 1)
//
// Stock llama.cpp has neither, so their dot products are defined here, not
// transcribed: both pair with Q8_0 activations (as the fork's PTQ1_0 CPU
// path and its first PQ2_0 path do), and one block computes
//
//	s_k  = Σ_{j<32} value[32k+j]·q_k[j]        exact int32, k = 0..3
//	blk  = d_x0·s_0,  blk = fma(d_xk, s_k, blk) for k = 1, 2, 3
//	sumf = fma(d_w, blk, sumf)
//
// in float32, each fma32 rounded once (d_x·s_k, 11 by 13 bits, is exact;
// d_w·blk is not): the order of the AVX-512 and AVX2 kernels, which
// therefore match the portable dot product bit for bit. The same ternary
// weights give the same result in either type.
const (
	qkPrism     = 128
	ptq1_0Bytes = 28
	ptq1_0D     = 26 // offset of d in a PTQ1_0 block
)

// pow3 are the trit place values of a byte, first trit most significant.
var pow3 = [5]int{81, 27, 9, 3, 1}

// trits[b][n] is trit n of byte b: byte b stands for the base-3 fraction
// b/256 ≈ N/243, and multiplying by 3 (mod 256) shifts the next trit into
// the top: t = ((uint8)(b·3ⁿ)·3) >> 8.
var trits = func() (tab [256][5]uint8) {
	for b := range tab {
		v := uint16(b)
		for n := range tab[b] {
			v *= 3
			tab[b][n] = uint8(v >> 8)
			v &= 0xff
		}
	}
	return tab
}()

// tritByte packs trits (first most significant) as the byte ceil(256·N/243),
// the inverse of trits for every N < 243.
func tritByte(t [5]uint8) byte {
	n := 0
	for i, ti := range t {
		n += int(ti) * pow3[i]
	}
	return byte((n*256 + 242) / 243)
}

// ptq1Trit is the trit of element j of a PTQ1_0 block: qs[0..15] hold
// elements 16n + m (trit n of qs[m]), qs[16..23] elements 80 + 8n + m,
// qh[0..1] elements 120 + 2n + h (four trits each).
func ptq1Trit(blk []byte, j int) uint8 {
	switch {
	case j < 80:
		return trits[blk[j%16]][j/16]
	case j < 120:
		return trits[blk[16+(j-80)%8]][(j-80)/8]
	}
	return trits[blk[24+(j-120)%2]][(j-120)/2]
}

func dequantizePTQ1_0(src []byte, dst []float32) {
	var v [qkPrism]int8
	for b := 0; b*qkPrism < len(dst); b++ {
		blk := src[b*ptq1_0Bytes:][:ptq1_0Bytes]
		ptq1Values(blk, &v)
		d := f16at(blk, ptq1_0D)
		for j, q := range v {
			dst[b*qkPrism+j] = float32(q) * d
		}
	}
}

// ptq1Values are the values t − 1 of a PTQ1_0 block, byte by byte.
func ptq1Values(blk []byte, v *[qkPrism]int8) {
	for m := 0; m < 16; m++ {
		t := &trits[blk[m]]
		v[m], v[16+m], v[32+m], v[48+m], v[64+m] = int8(t[0])-1, int8(t[1])-1, int8(t[2])-1, int8(t[3])-1, int8(t[4])-1
	}
	for m := 0; m < 8; m++ {
		t := &trits[blk[16+m]]
		v[80+m], v[88+m], v[96+m], v[104+m], v[112+m] = int8(t[0])-1, int8(t[1])-1, int8(t[2])-1, int8(t[3])-1, int8(t[4])-1
	}
	for h := 0; h < 2; h++ {
		t := &trits[blk[24+h]]
		v[120+h], v[122+h], v[124+h], v[126+h] = int8(t[0])-1, int8(t[1])-1, int8(t[2])-1, int8(t[3])-1
	}
}

// quantizePTQ1_0 is quantize_row_tq1_0_ref at group 128: d = max |x|, t =
// roundf(x/d) + 1 (clamped, for NaNs), five trits per byte as
// ceil(256·N/243); qh's four trits are shifted up one place first.
// Ternary inputs come back exactly.
func quantizePTQ1_0(src []float32, dst []byte) {
	for b := 0; b*qkPrism < len(src); b++ {
		x := src[b*qkPrism : (b+1)*qkPrism]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		var id float32
		if amax != 0 {
			id = 1 / amax
		}
		trit := func(j int) uint8 {
			return uint8(min(2, max(0, int32(math.Round(float64(x[j]*id)))+1)))
		}
		blk := dst[b*ptq1_0Bytes : (b+1)*ptq1_0Bytes]
		for m := 0; m < 16; m++ {
			blk[m] = tritByte([5]uint8{trit(m), trit(16 + m), trit(32 + m), trit(48 + m), trit(64 + m)})
		}
		for m := 0; m < 8; m++ {
			blk[16+m] = tritByte([5]uint8{trit(80 + m), trit(88 + m), trit(96 + m), trit(104 + m), trit(112 + m)})
		}
		for h := 0; h < 2; h++ {
			blk[24+h] = tritByte([5]uint8{trit(120 + h), trit(122 + h), trit(124 + h), trit(126 + h), 0})
		}
		binary.LittleEndian.PutUint16(blk[ptq1_0D:], F32ToF16(amax))
	}
}

// pq2Values are the values code − 1 of a PQ2_0 (Q2_0G128) block.
func pq2Values(blk []byte, v *[qkPrism]int8) {
	for i, b := range blk[2:q2_0G128Bytes] {
		v[4*i], v[4*i+1], v[4*i+2], v[4*i+3] = int8(b&3)-1, int8(b>>2&3)-1, int8(b>>4&3)-1, int8(b>>6)-1
	}
}

func dotPQ2_0(n int, w, x []byte) float32 {
	return dotPrism(n, w, x, q2_0G128Bytes, 0, pq2Values)
}

func dotPTQ1_0(n int, w, x []byte) float32 {
	return dotPrism(n, w, x, ptq1_0Bytes, ptq1_0D, ptq1Values)
}

// dotPrism is the Prism types' dot product (see the top of this file);
// values decodes one block and d sits at dOff in it.
func dotPrism(n int, w, x []byte, blockBytes, dOff int, values func(blk []byte, v *[qkPrism]int8)) float32 {
	var sumf float32
	var v [qkPrism]int8
	for b := 0; b < n/qkPrism; b++ {
		blk := w[b*blockBytes:][:blockBytes]
		values(blk, &v)
		var sumBlock float32
		for k := 0; k < 4; k++ {
			xb := x[(4*b+k)*q8_0Bytes:][:q8_0Bytes]
			xs, vs := (*[32]byte)(xb[2:]), (*[32]int8)(v[32*k:])
			var sumi int32
			for j, q := range vs {
				sumi += int32(q) * int32(int8(xs[j]))
			}
			if k == 0 {
				sumBlock = f16at(xb, 0) * float32(sumi)
			} else {
				sumBlock = fma32(f16at(xb, 0), float32(sumi), sumBlock)
			}
		}
		sumf = fma32(f16at(blk, dOff), sumBlock, sumf)
	}
	return sumf
}
