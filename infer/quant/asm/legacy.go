package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Kernels of the legacy 32-element types Q4_1, Q5_0 and Q5_1
// (BONSAI_ASM_SET=legacy, into legacy_amd64.s), over their packed layouts
// (repack.go's Q4_0 layout of nibbles, then for the 5-bit types a plane of
// fifth bits, then the f16 scales d and, for the _1 types, the f16 offsets
// m):
//
//	[0, 256)   byte 4r+e of chunk p: row r, column 8p+e (low nibble) and 8p+4+e (high)
//	[256, 320) Q5: byte 4r+e bit g = fifth bit of row r, column 4g+e
//	then 16 f16 d, then (Q4_1, Q5_1) 16 f16 m
//
// The code u is unsigned (0..15 or 0..31); Q5_0's value is u − 16, so its
// sums start at −16·Σq (the negq plane) as Q4_0's at −8·Σq; Q4_1 and Q5_1
// need no offset, and their negq plane holds the Q8_1 activations' s. Per
// block and row:
//
//	acc += float(sumi)·(d_w·d_x)        (all three)
//	acc += m_w·s_x                      (Q4_1, Q5_1; one more FMA)
//
// The AVX2 kernels take the same float steps in the same order, so they
// are bit-identical to the AVX-512 ones.
type legacySpec struct {
	name       string
	blockBytes int
	hbits      bool // a plane of fifth bits at 256
	shift      int  // sums start at −(1<<shift)·Σq; 0: at 0
	scales     int
	m          int // offset of the f16 m, 0 if none
}

var legacySpecs = []legacySpec{
	{name: "q4_1", blockBytes: 320, scales: 256, m: 288},
	{name: "q5_0", blockBytes: 352, hbits: true, shift: 4, scales: 320},
	{name: "q5_1", blockBytes: 384, hbits: true, scales: 320, m: 352},
}

func legacyMain() {
	legacyData()
	for _, s := range legacySpecs {
		for _, t := range []int{1, 2, 4, 8} {
			legacyKernel(s, t)
		}
		legacyAVX2(s, 2, 1)
		legacyAVX2(s, 1, 4)
	}
	Generate()
}

// legacyKernel generates <name>x16t<T>, the AVX-512 VNNI kernel of 16 rows
// × T tokens (main.go's kernel with the fifth bit and the m term).
func legacyKernel(s legacySpec, T int) {
	name := fmt.Sprintf("%sx16t%d", s.name, T)
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a %s product.", name, T, s.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	negq := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	nib := broadcastByte(0x0f)
	var bit4 reg.VecVirtual
	if s.hbits {
		bit4 = broadcastByte(0x10)
	}
	acc, sum := make([]reg.VecVirtual, T), make([]reg.VecVirtual, T)
	for t := range acc {
		acc[t], sum[t] = ZMM(), ZMM()
		VPXORD(acc[t], acc[t], acc[t])
	}

	Label("block")
	for off := 0; off < s.blockBytes; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: prefetchBlocks*s.blockBytes + off})
	}
	for t := 0; t < T; t++ {
		if s.shift == 0 {
			VPXORD(sum[t], sum[t], sum[t])
			continue
		}
		VPBROADCASTD(Mem{Base: negq, Disp: 4 * t}, sum[t])
		VPSLLD(U8(s.shift), sum[t], sum[t])
	}
	var h reg.VecVirtual
	if s.hbits {
		h = ZMM()
		VMOVDQU64(Mem{Base: w, Disp: 256}, h)
	}
	for p := 0; p < 4; p++ {
		v, lo, hi := ZMM(), ZMM(), ZMM()
		VMOVDQU64(Mem{Base: w, Disp: 64 * p}, v)
		VPANDD(nib, v, lo)
		VPSRLW(U8(4), v, hi)
		VPANDD(nib, hi, hi)
		for j, u := range []reg.VecVirtual{lo, hi} {
			g := 2*p + j
			if s.hbits {
				// Bit g of each byte to bit 4 (word shifts: the mask
				// drops what crosses bytes), or'ed in: u |= hb & 0x10.
				hb := h
				if g != 4 {
					hb = ZMM()
					if g < 4 {
						VPSLLW(U8(4-g), h, hb)
					} else {
						VPSRLW(U8(g-4), h, hb)
					}
				}
				VPTERNLOGD(U8(0xf8), bit4, hb, u)
			}
			for t := 0; t < T; t++ {
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*g + 4*t}, u, sum[t])
			}
		}
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: s.scales}, dw)
	for t := 0; t < T; t++ {
		VCVTDQ2PS(sum[t], sum[t])
		d := ZMM()
		VMULPS_BCST(Mem{Base: dk, Disp: 4 * t}, dw, d)
		VFMADD231PS(sum[t], d, acc[t])
	}
	if s.m != 0 {
		mw := ZMM()
		VCVTPH2PS(Mem{Base: w, Disp: s.m}, mw)
		for t := 0; t < T; t++ {
			VFMADD231PS_BCST(Mem{Base: negq, Disp: 4 * t}, mw, acc[t])
		}
	}
	ADDQ(U32(s.blockBytes), w)
	ADDQ(U32(8*32), qs)
	ADDQ(U32(32), negq)
	ADDQ(U32(32), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	storeRows(acc)
}

var legacyNibble, legacyBit4, legacyOnes16 Mem

// legacyData emits the AVX2 kernels' constants, which they read as memory
// operands: 16 YMM registers barely hold 4 tokens' sums.
func legacyData() {
	legacyNibble = GLOBL("legacynibble", attr.RODATA|attr.NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(0x0f))
	}
	legacyBit4 = GLOBL("legacybit4", attr.RODATA|attr.NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(0x10))
	}
	legacyOnes16 = GLOBL("legacyones16", attr.RODATA|attr.NOPTR)
	for i := 0; i < 16; i++ {
		DATA(2*i, U16(1))
	}
}

// legacyAVX2 generates <name>x<8H>avx2t<T>: 8H rows (one or both halves of
// a group) × T tokens, as q4_0AVX2. VPMADDUBSW's int16 pairs hold
// 2·31·127 = 7874 at most, so the 5-bit codes' sums are widened after
// every 4 groups (4·7874 < 2¹⁵), the 4-bit ones after all 8.
func legacyAVX2(s legacySpec, H, T int) {
	name := fmt.Sprintf("%sx%davx2t%d", s.name, 8*H, T)
	TEXT(name, NOSPLIT, "func(w *byte, sc *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int)")
	Doc(fmt.Sprintf("%s computes %d rows × %d tokens of a %s product with AVX2.", name, 8*H, T, s.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	sc := Load(Param("sc"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	negq := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	acc := zeroed(H * T)
	Label("block")
	avx2Prefetch(w, s.blockBytes)
	sum := make([]reg.VecVirtual, H*T)
	run := 8
	if s.hbits {
		run = 4
	}
	for g0 := 0; g0 < 8; g0 += run {
		part := make([]reg.VecVirtual, H*T)
		for g := g0; g < g0+run; g++ {
			u := make([]reg.VecVirtual, H)
			for h := 0; h < H; h++ {
				u[h] = YMM()
				VMOVDQU(Mem{Base: w, Disp: 64*(g/2) + 32*h}, u[h])
				if g%2 == 1 {
					VPSRLW(U8(4), u[h], u[h])
				}
				VPAND(legacyNibble, u[h], u[h])
				if s.hbits {
					hb := YMM()
					VMOVDQU(Mem{Base: w, Disp: 256 + 32*h}, hb)
					switch {
					case g < 4:
						VPSLLW(U8(4-g), hb, hb)
					case g > 4:
						VPSRLW(U8(g-4), hb, hb)
					}
					VPAND(legacyBit4, hb, hb)
					VPOR(hb, u[h], u[h])
				}
			}
			for t := 0; t < T; t++ {
				x := YMM()
				VPBROADCASTD(Mem{Base: qs, Disp: 32*g + 4*t}, x)
				for h := 0; h < H; h++ {
					i := h*T + t
					if g == g0 {
						part[i] = YMM()
						VPMADDUBSW(x, u[h], part[i])
					} else {
						prod := YMM()
						VPMADDUBSW(x, u[h], prod)
						VPADDW(prod, part[i], part[i])
					}
				}
			}
		}
		for i := range part {
			VPMADDWD(legacyOnes16, part[i], part[i])
			if g0 == 0 {
				sum[i] = part[i]
			} else {
				VPADDD(part[i], sum[i], sum[i])
			}
		}
	}
	if s.shift != 0 {
		for t := 0; t < T; t++ {
			off := YMM()
			VPBROADCASTD(Mem{Base: negq, Disp: 4 * t}, off)
			VPSLLD(U8(s.shift), off, off)
			for h := 0; h < H; h++ {
				VPADDD(off, sum[h*T+t], sum[h*T+t])
			}
		}
	}
	avx2Scale(sc, dk, H, T, sum, acc)
	if s.m != 0 {
		for h := 0; h < H; h++ {
			mw := YMM()
			VCVTPH2PS(Mem{Base: sc, Disp: s.m - s.scales + 16*h}, mw)
			for t := 0; t < T; t++ {
				sx := YMM()
				VBROADCASTSS(Mem{Base: negq, Disp: 4 * t}, sx)
				VFMADD231PS(sx, mw, acc[h*T+t])
			}
		}
	}
	avx2Tail(s.blockBytes, w, sc, blocks, qs, negq, dk, H, T, acc)
}
