package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Kernels for PTQ1_0, and the AVX2 kernels of the 2-bit codec (Q2_0, the
// legacy Q2_0G128 and PQ2_0): one f16 scale per block, u = code or trit,
// value u − 1, so c = 1. Layouts (infer/quant/repack.go):
//
//	q2:     chunk p (64 bytes) holds groups 4p+j as bits 2j of each byte,
//	        so u = (chunk >> 2j) & 3;
//	ptq1_0: chunk c (64 bytes) holds groups 5c+n as trit n of each byte v,
//	        the 32-byte tail groups 30 and 31 (rows 0–7 in trits 0 and 2,
//	        rows 8–15 in trits 1 and 3); the top trit is [v > 85] + [v >
//	        170], and v ← 3·v mod 256 brings up the next.
//
// The AVX2 kernels below scale as the AVX-512 ones (kernel in main.go) do,
// which for PQ2_0 and PTQ1_0 is also the portable dot product's order:
// blk = d_x0·s_0, blk = fma(d_xk, s_k, blk), acc = fma(d_w, blk, acc).

// ptq1Upper selects the upper 32 bytes of a ZMM (rows 8–15), whose tail
// trits sit one place below the lower half's.
var ptq1Upper reg.OpmaskVirtual

var ptq1_0Spec = spec{
	name: "ptq1_0", cols: 128, blockBytes: 448, scales: 416, shift: 0,
	setup: func() []reg.VecVirtual {
		r := GP64()
		MOVQ(U64(0xffffffff00000000), r)
		ptq1Upper = K()
		KMOVQ(r, ptq1Upper)
		return []reg.VecVirtual{broadcastByte(1), broadcastByte(85), broadcastByte(170)}
	},
	u: func(w reg.Register, c []reg.VecVirtual, g int, cache map[int]reg.VecVirtual) reg.VecVirtual {
		st := cache[-1]
		switch {
		case ptq1Fresh(g):
			st = ptq1Load(w, g)
		case g == 31: // trits 2 and 3, after 0 and 1
			times3(st, ZMM)
			times3(st, ZMM)
		default:
			times3(st, ZMM)
		}
		cache[-1] = st
		k1, k2, u := K(), K(), ZMM()
		VPCMPUB(U8(6), c[1], st, k1) // v > 85
		VPCMPUB(U8(6), c[2], st, k2) // v > 170
		VMOVDQU8_Z(c[0], k1, u)
		VPADDB(c[0], u, k2, u)
		return u
	},
	few: ptq1Linear,
}

// ptq1Fresh reports whether group g starts a chunk or the tail.
func ptq1Fresh(g int) bool { return g < 30 && g%5 == 0 || g == 30 }

// ptq1Load loads the state of group g (ptq1Fresh): a chunk, or the tail
// with rows 8–15 one trit further (trit 1, rows 0–7 at trit 0).
func ptq1Load(w reg.Register, g int) reg.VecVirtual {
	st := ZMM()
	if g < 30 {
		VMOVDQU64(Mem{Base: w, Disp: 64 * (g / 5)}, st)
		return st
	}
	VBROADCASTI64X4(Mem{Base: w, Disp: 384}, st)
	t := ZMM()
	VPADDB(st, st, t)
	VPADDB(t, st, ptq1Upper, st)
	return st
}

// ptq1Linear generates ptq1_0x16t<T> for few tokens, where extracting the
// trits would cost more than the products. With v' = 3·v mod 256 the top
// trit is t = (3·v − v')/256 exactly, so per group
//
//	Σ t·q = (3·Σ v·q − Σ v'·q) / 256,
//
// two VPDPBUSDs of the states themselves into A and B (and v' is the next
// group's v); per sub-block s =
// (3A − B)/256 − Σq, the same exact integer as the other kernels'. States
// and activations are below 256 and 128, so A < 32·255·127 < 2³¹/3.
func ptq1Linear(s spec, T int) {
	name := fmt.Sprintf("%sx16t%d", s.name, T)
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a %s · Q8_0 product.", name, T, s.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	negq := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	s.setup()
	acc := make([]reg.VecVirtual, T)
	blk := make([]reg.VecVirtual, T)
	for t := range acc {
		acc[t], blk[t] = ZMM(), ZMM()
		VPXORD(acc[t], acc[t], acc[t])
	}

	Label("block")
	for off := 0; off < s.blockBytes; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: prefetchBlocks*s.blockBytes + off})
	}
	var st reg.VecVirtual
	for k := 0; k < 4; k++ {
		a, b := make([]reg.VecVirtual, T), make([]reg.VecVirtual, T)
		for t := range a {
			a[t], b[t] = ZMM(), ZMM()
			VPXORD(a[t], a[t], a[t])
			VPXORD(b[t], b[t], b[t])
		}
		for g := 8 * k; g < 8*k+8; g++ {
			switch {
			case ptq1Fresh(g):
				st = ptq1Load(w, g)
			case g == 31: // trits 2 and 3: one step past group 30's v'
				times3(st, ZMM)
			} // else st is the previous group's v', this group's v
			for t := 0; t < T; t++ {
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*g + 4*t}, st, a[t])
			}
			times3(st, ZMM)
			for t := 0; t < T; t++ {
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*g + 4*t}, st, b[t])
			}
		}
		for t := 0; t < T; t++ {
			sum := ZMM()
			VPADDD(a[t], a[t], sum)
			VPADDD(a[t], sum, sum)
			VPSUBD(b[t], sum, sum)
			VPSRAD(U8(8), sum, sum)
			VPADDD_BCST(Mem{Base: negq, Disp: 32*k + 4*t}, sum, sum)
			VCVTDQ2PS(sum, sum)
			if k == 0 {
				VMULPS_BCST(Mem{Base: dk, Disp: 32*k + 4*t}, sum, blk[t])
			} else {
				VFMADD231PS_BCST(Mem{Base: dk, Disp: 32*k + 4*t}, sum, blk[t])
			}
		}
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: s.scales}, dw)
	for t := 0; t < T; t++ {
		VFMADD231PS(blk[t], dw, acc[t])
	}
	ADDQ(U32(s.blockBytes), w)
	ADDQ(U32(8*s.cols), qs)
	ADDQ(U32(32*4), negq)
	ADDQ(U32(32*4), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	storeRows(acc)
}

// times3 sets each byte of v to 3·v mod 256: the next trit to the top.
func times3(v reg.VecVirtual, alloc func() reg.VecVirtual) {
	t := alloc()
	VPADDB(v, v, t)
	VPADDB(t, v, v)
}

var avx2Crumb, avx2TritLo, avx2TritHi Mem

// prismAVX2Kernels emits the constants and the AVX2 kernels: 16 rows × 1
// token and 8 rows × 4 tokens; PTQ1_0's 8-row kernel comes in one variant
// per half, because both halves read the same tail bytes.
func prismAVX2Kernels() {
	splat := func(name string, b byte) Mem {
		m := GLOBL(name, attr.RODATA|attr.NOPTR)
		for i := 0; i < 32; i++ {
			DATA(i, U8(b))
		}
		return m
	}
	avx2Crumb = splat("pq2avx2crumb", 3)
	avx2TritLo = splat("ptq1avx2lo", 0xd5) // −43
	avx2TritHi = splat("ptq1avx2hi", 42)
	for _, q2 := range []prismAVX2{
		{name: "q2_0", cols: 64, blockBytes: 288, newExpand: newCrumbs},
		{name: "q2_0g128", cols: 128, blockBytes: 544, newExpand: newCrumbs},
	} {
		q2.kernel(q2.name+"x16avx2t1", []int{0, 1}, 1)
		q2.kernel(q2.name+"x8avx2t4", []int{0}, 4)
	}
	ptq := prismAVX2{name: "ptq1_0", cols: 128, blockBytes: 448, newExpand: newTrits}
	ptq.kernel("ptq1_0x16avx2t1", []int{0, 1}, 1)
	ptq.kernel("ptq1_0x8avx2t4h0", []int{0}, 4)
	ptq.kernel("ptq1_0x8avx2t4h1", []int{1}, 4)
}

// prismAVX2 describes one layout's AVX2 kernels.
type prismAVX2 struct {
	name       string
	cols       int // per block: cols/32 sub-blocks
	blockBytes int
	newExpand  func(w reg.Register, halves []int) expander
}

// expander yields u of group g (0 … cols/4 − 1, in order) for the i-th
// half the kernel computes: 8 rows × 4 columns as 32 unsigned bytes.
type expander func(g, i int) reg.VecVirtual

// newCrumbs: chunk p's row-half bytes, then u = (v >> 2j) & 3. An 8-row
// kernel's w already points at its half, so the half's offset is 32·i.
func newCrumbs(w reg.Register, halves []int) expander {
	v := make([]reg.VecVirtual, len(halves))
	return func(g, i int) reg.VecVirtual {
		p, j := g/4, g%4
		if j == 0 {
			v[i] = YMM()
			VMOVDQU(Mem{Base: w, Disp: 64*p + 32*i}, v[i])
		}
		u := YMM()
		if j == 0 {
			VPAND(avx2Crumb, v[i], u)
			return u
		}
		VPSRLW(U8(2*j), v[i], u)
		VPAND(avx2Crumb, u, u)
		return u
	}
}

// newTrits: chunk c's row-half bytes, or for groups 30 and 31 the shared
// tail (at 384 from the group, w being 32·half past it in an 8-row
// kernel), brought to the half's trit. AVX2 compares only signed bytes, so
// the state is kept as w = v − 128 (XOR 0x80), which also evolves as 3·w
// mod 256; the trit is [w > −43] + [w > 42], summed as −1s and negated by
// VPABSB.
func newTrits(w reg.Register, halves []int) expander {
	st := make([]reg.VecVirtual, len(halves))
	return func(g, i int) reg.VecVirtual {
		h := halves[i]
		switch {
		case g < 30 && g%5 == 0:
			st[i] = YMM()
			VMOVDQU(Mem{Base: w, Disp: 64*(g/5) + 32*i}, st[i])
			VPXOR(avx2Sign, st[i], st[i])
		case g == 30:
			st[i] = YMM()
			VMOVDQU(Mem{Base: w, Disp: 384 - 32*(h-i)}, st[i])
			VPXOR(avx2Sign, st[i], st[i])
			if h == 1 {
				times3(st[i], YMM)
			}
		case g == 31:
			times3(st[i], YMM)
			times3(st[i], YMM)
		default:
			times3(st[i], YMM)
		}
		m1, m2 := YMM(), YMM()
		VPCMPGTB(avx2TritLo, st[i], m1)
		VPCMPGTB(avx2TritHi, st[i], m2)
		VPADDB(m2, m1, m1)
		VPABSB(m1, m1)
		return m1
	}
}

// kernel generates one AVX2 kernel over the given halves (row halves 0
// and 1 at once, or one) × T tokens. Codes and trits are at most 3 and
// |q| ≤ 127, so VPMADDUBSW never saturates and the 8 groups of a
// 32-column sub-block sum in int16 (8·2·3·127 < 2¹⁵); VPMADDWD by ones
// widens them and the accumulator gets −Σq from the negq plane.
func (p prismAVX2) kernel(name string, halves []int, T int) {
	TEXT(name, NOSPLIT, "func(w *byte, sc *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int)")
	Doc(fmt.Sprintf("%s computes %d rows × %d tokens of a %s · Q8_0 product with AVX2.", name, 8*len(halves), T, p.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	sc := Load(Param("sc"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	negq := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	H := len(halves)
	acc := zeroed(H * T)
	blk := make([]reg.VecVirtual, H*T)

	Label("block")
	avx2Prefetch(w, p.blockBytes)
	expand := p.newExpand(w, halves)
	subs := p.cols / 32
	for k := 0; k < subs; k++ {
		sum := make([]reg.VecVirtual, H*T)
		for g := 8 * k; g < 8*k+8; g++ {
			u := make([]reg.VecVirtual, H)
			for i := range u {
				u[i] = expand(g, i)
			}
			for t := 0; t < T; t++ {
				x := YMM()
				VPBROADCASTD(Mem{Base: qs, Disp: 32*g + 4*t}, x)
				for i := 0; i < H; i++ {
					j := i*T + t
					switch {
					case g == 8*k:
						sum[j] = YMM()
						VPMADDUBSW(x, u[i], sum[j])
					case H == 1: // x is needed once: reuse it
						VPMADDUBSW(x, u[i], x)
						VPADDW(x, sum[j], sum[j])
					default:
						prod := YMM()
						VPMADDUBSW(x, u[i], prod)
						VPADDW(prod, sum[j], sum[j])
					}
				}
			}
		}
		for t := 0; t < T; t++ {
			off, d := YMM(), YMM()
			VPBROADCASTD(Mem{Base: negq, Disp: 32*k + 4*t}, off)
			VBROADCASTSS(Mem{Base: dk, Disp: 32*k + 4*t}, d)
			for i := 0; i < H; i++ {
				j := i*T + t
				VPMADDWD(avx2Ones16, sum[j], sum[j])
				VPADDD(off, sum[j], sum[j])
				VCVTDQ2PS(sum[j], sum[j])
				if k == 0 {
					blk[j] = YMM()
					VMULPS(d, sum[j], blk[j])
				} else {
					VFMADD231PS(d, sum[j], blk[j])
				}
			}
		}
	}
	for i := 0; i < H; i++ {
		dw := YMM()
		VCVTPH2PS(Mem{Base: sc, Disp: 16 * i}, dw)
		for t := 0; t < T; t++ {
			VFMADD231PS(blk[i*T+t], dw, acc[i*T+t])
		}
	}
	ADDQ(U32(p.blockBytes), w)
	ADDQ(U32(p.blockBytes), sc)
	ADDQ(U32(8*p.cols), qs) // cols/4 groups × 8 tokens × 4 bytes
	ADDQ(U32(32*subs), negq)
	ADDQ(U32(32*subs), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	for t := 0; t < T; t++ {
		for i := 0; i < H; i++ {
			VMOVUPS(acc[i*T+t], Mem{Base: y, Disp: 32 * i})
		}
		if t+1 < T {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}
