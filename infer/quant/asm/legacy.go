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
// ggml's dot products of these types (and tinyBLAS's Q5_0 gemm) keep
// eight f32 lanes per row, lane l the exact integer sum of columns
// 4l…4l+3 of each block, which is what one VPDPBUSD of group l yields:
//
//	acc[l] = fma(d_w·d_x, float(sum_l), acc[l])     per block, l = 0…7
//	ms     = fma(m_w, s_x, ms)                       Q4_1, Q5_1
//	y      = ((acc4+acc0) + (acc6+acc2)) + ((acc5+acc1) + (acc7+acc3)) (+ ms)
//
// Eight accumulators per row and token leave room for 2 tokens in the
// AVX-512 kernels (16 rows each) and one in the AVX2 ones (8 rows). Q5_0's
// value is u − 16 for the code u, so its lane sums start at −16·Σ of the
// group's 4 activations (the planes' gsum, so scaled); Q4_1 and Q5_1 need no offset,
// and their off plane holds the Q8_1 activations' s. The AVX2 kernels take
// the same float steps, so they are bit-identical to the AVX-512 ones.
type legacySpec struct {
	name       string
	blockBytes int
	hbits      bool // a plane of fifth bits at 256
	offset     bool // lane sums start at the gsum plane's −16·Σq (Q5_0), else at 0
	scales     int
	m          int // offset of the f16 m, 0 if none
}

var legacySpecs = []legacySpec{
	{name: "q4_1", blockBytes: 320, scales: 256, m: 288},
	{name: "q5_0", blockBytes: 352, hbits: true, offset: true, scales: 320},
	{name: "q5_1", blockBytes: 384, hbits: true, scales: 320, m: 352},
}

func legacyMain() {
	legacyData()
	for _, s := range legacySpecs {
		legacyKernel(s, 1)
		legacyKernel(s, 2)
		legacyAVX2(s)
	}
	Generate()
}

// legacyKernel generates <name>x16t<T>, the AVX-512 VNNI kernel of 16 rows
// × T tokens.
func legacyKernel(s legacySpec, T int) {
	name := fmt.Sprintf("%sx16t%d", s.name, T)
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, qs *byte, off *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a %s product.", name, T, s.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	off := Load(Param("off"), GP64())
	dk := Load(Param("dk"), GP64())
	nib := broadcastByte(0x0f)
	var bit4 reg.VecVirtual
	if s.hbits {
		bit4 = broadcastByte(0x10)
	}
	// A fresh register zeroed by VPXORD would count as live from the
	// start for avo's allocator (the XOR reads it): the lane sums copy
	// this one.
	zero := ZMM()
	VPXORD(zero, zero, zero)
	acc := make([][8]reg.VecVirtual, T)
	for t := range acc {
		for l := range acc[t] {
			acc[t][l] = ZMM()
			VPXORD(acc[t][l], acc[t][l], acc[t][l])
		}
	}

	Label("block")
	// Into L2, as kernel's (Q5_0 from memory, one thread on Zen 4: 10.5
	// GB/s with PREFETCHT0, 14.8 with PREFETCHT2).
	for o := 0; o < s.blockBytes; o += 64 {
		PREFETCHT2(Mem{Base: w, Disp: prefetchBlocks*s.blockBytes + o})
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: s.scales}, dw)
	d := make([]reg.VecVirtual, T)
	for t := range d {
		d[t] = ZMM()
		VMULPS_BCST(Mem{Base: dk, Disp: 4 * t}, dw, d[t])
	}
	var h reg.VecVirtual
	if s.hbits {
		h = ZMM()
		VMOVDQU64(Mem{Base: w, Disp: 256}, h)
	}
	for p := 0; p < 4; p++ {
		v := ZMM()
		VMOVDQU64(Mem{Base: w, Disp: 64 * p}, v)
		for j := 0; j < 2; j++ {
			g := 2*p + j
			u := ZMM()
			if j == 0 {
				VPANDD(nib, v, u)
			} else {
				VPSRLW(U8(4), v, u)
				VPANDD(nib, u, u)
			}
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
				sum := ZMM()
				if !s.offset {
					VMOVDQA64(zero, sum)
				} else {
					VPBROADCASTD(Mem{Base: off, Disp: 32*g + 4*t}, sum)
				}
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*g + 4*t}, u, sum)
				VCVTDQ2PS(sum, sum)
				VFMADD231PS(sum, d[t], acc[t][g])
			}
		}
	}
	ADDQ(U32(s.blockBytes), w)
	ADDQ(U32(8*32), qs)
	if !s.offset {
		ADDQ(U32(32), off) // s per block
	} else {
		ADDQ(U32(8*32), off) // −Σ per group
	}
	ADDQ(U32(32), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	// The m·s terms in a second pass over the blocks (reading only the
	// m): their own accumulators beside the lanes' would not fit the
	// registers.
	ms := make([]reg.VecVirtual, T)
	if s.m != 0 {
		Load(Param("w"), w)
		Load(Param("blocks"), blocks)
		Load(Param("off"), off)
		for t := range ms {
			ms[t] = ZMM()
			VPXORD(ms[t], ms[t], ms[t])
		}
		Label("mblock")
		mw := ZMM()
		VCVTPH2PS(Mem{Base: w, Disp: s.m}, mw)
		for t := 0; t < T; t++ {
			VFMADD231PS_BCST(Mem{Base: off, Disp: 4 * t}, mw, ms[t])
		}
		ADDQ(U32(s.blockBytes), w)
		ADDQ(U32(32), off)
		DECQ(blocks)
		JNZ(LabelRef("mblock"))
	}
	out := make([]reg.VecVirtual, T)
	for t := range out {
		out[t] = sumLanes(acc[t], ms[t], VADDPS)
	}
	storeRows(out)
}

// sumLanes emits hsum_float_8's order over the lane registers a:
// ((a4+a0) + (a6+a2)) + ((a5+a1) + (a7+a3)), plus ms if it is set, and
// returns the register holding it (a[0]).
func sumLanes(a [8]reg.VecVirtual, ms reg.VecVirtual, add func(ops ...Op)) reg.VecVirtual {
	add(a[4], a[0], a[0])
	add(a[6], a[2], a[2])
	add(a[2], a[0], a[0])
	add(a[5], a[1], a[1])
	add(a[7], a[3], a[3])
	add(a[3], a[1], a[1])
	add(a[1], a[0], a[0])
	if ms != nil {
		add(ms, a[0], a[0])
	}
	return a[0]
}

var legacyNibble, legacyBit4, legacyOnes16 Mem

// legacyData emits the AVX2 kernels' constants, which they read as memory
// operands: eight accumulators leave few YMM registers.
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

// legacyAVX2 generates <name>x8avx2t1: one 8-row half of a group (w and sc
// point at it: rows 8–15 sit 32 bytes into each chunk, their scales 16
// bytes on) × one token. A group of 4 codes times 4 activations stays
// within VPMADDUBSW's int16 pairs (2·31·127), and VPMADDWD widens it.
func legacyAVX2(s legacySpec) {
	name := fmt.Sprintf("%sx8avx2t1", s.name)
	TEXT(name, NOSPLIT, "func(w *byte, sc *byte, blocks int, qs *byte, off *byte, dk *byte, y *float32)")
	Doc(fmt.Sprintf("%s computes 8 rows × 1 token of a %s product with AVX2.", name, s.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	sc := Load(Param("sc"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	off := Load(Param("off"), GP64())
	dk := Load(Param("dk"), GP64())
	var acc [8]reg.VecVirtual
	copy(acc[:], zeroed(8))
	var ms reg.VecVirtual
	if s.m != 0 {
		ms = zeroed(1)[0]
	}
	Label("block")
	avx2Prefetch(w, s.blockBytes)
	d := YMM()
	VCVTPH2PS(Mem{Base: sc}, d)
	dx := YMM()
	VBROADCASTSS(Mem{Base: dk}, dx)
	VMULPS(dx, d, d)
	for g := 0; g < 8; g++ {
		u := YMM()
		VMOVDQU(Mem{Base: w, Disp: 64 * (g / 2)}, u)
		if g%2 == 1 {
			VPSRLW(U8(4), u, u)
		}
		VPAND(legacyNibble, u, u)
		if s.hbits {
			hb := YMM()
			VMOVDQU(Mem{Base: w, Disp: 256}, hb)
			switch {
			case g < 4:
				VPSLLW(U8(4-g), hb, hb)
			case g > 4:
				VPSRLW(U8(g-4), hb, hb)
			}
			VPAND(legacyBit4, hb, hb)
			VPOR(hb, u, u)
		}
		x := YMM()
		VPBROADCASTD(Mem{Base: qs, Disp: 32 * g}, x)
		VPMADDUBSW(x, u, u)
		VPMADDWD(legacyOnes16, u, u)
		if s.offset {
			o := YMM()
			VPBROADCASTD(Mem{Base: off, Disp: 32 * g}, o)
			VPADDD(o, u, u)
		}
		VCVTDQ2PS(u, u)
		VFMADD231PS(u, d, acc[g])
	}
	if s.m != 0 {
		mw, sx := YMM(), YMM()
		VCVTPH2PS(Mem{Base: sc, Disp: s.m - s.scales}, mw)
		VBROADCASTSS(Mem{Base: off}, sx)
		VFMADD231PS(sx, mw, ms)
	}
	ADDQ(U32(s.blockBytes), w)
	ADDQ(U32(s.blockBytes), sc)
	ADDQ(U32(8*32), qs)
	if !s.offset {
		ADDQ(U32(32), off)
	} else {
		ADDQ(U32(8*32), off)
	}
	ADDQ(U32(32), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	r := sumLanes(acc, ms, VADDPS)
	y := Load(Param("y"), GP64())
	VMOVUPS(r, Mem{Base: y})
	VZEROUPPER()
	RET()
}
