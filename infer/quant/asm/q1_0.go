package main

import (
	"fmt"
	"slices"

	"github.com/mmcloughlin/avo/attr"
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The Q1_0 kernels (BONSAI_ASM_SET=q1_0, into q1_0_amd64.s) sum in the
// order of ggml_vec_dot_q1_0_q8_0's AVX2 code, which is what llama.cpp's
// x86 build runs for one token and for prompts alike: eight f32 lanes per
// row, lane l holding the 4-column group l of each 32-column Q8_0
// sub-block k of a 128-column block, so that per block
//
//	p_k[l] = d_xk · Σ_{e<4} ±q[32k+4l+e]           (exact: 11 × 9 bits)
//	blk[l] = ((p_0[l] + p_1[l]) + p_2[l]) + p_3[l]  (ggml's mul and FMAs
//	                                                 of exact products)
//	acc[l] = fma(d_w, blk[l], acc[l])
//
// and the row's result is ((a4+a0)+(a6+a2)) + ((a5+a1)+(a7+a3)).
//
// A 4-column group of ±1 weights has 16 sign patterns, so p_k[l] is one of
// 16 floats per group of the token: q1_0Tables writes them once per token
// (a 64-byte table per group, entry n for the pattern whose bit e is
// column e's weight bit), and the kernels look them up with VPERMPS, which
// reads the low 4 bits of each dword as the index: one lookup gives p for
// 16 rows. The packed weights (repack.go's layoutQ1_0) hold, per 16 rows ×
// block, four 64-byte chunks k whose dword r has row r's bits of groups
// 8k…8k+7 as nibbles (nibble j = group 8k+j), then the 16 f16 row scales:
// group j's indices are the chunk shifted right by 4j.

// q1_0Main generates q1_0_amd64.s.
func q1_0Main() {
	q1_0Data()
	q1_0Tables()
	q1_0TablesAVX2()
	q1_0Kernel(1, nil)
	q1_0Kernel(2, []int{1, 3})
	q1_0PairKernel(4, []int{1, 2, 3})
	q1_0AVX2Data()
	for _, T := range []int{1, 2, 3, 4} {
		q1_0AVX2Kernel(T)
	}
	Generate()
}

var q1Signs, q1Bias Mem

// q1_0Data emits the table builder's constants: lane n of q1signs holds the
// four signs of pattern n as int8 (+1 where bit e of n is set), lane n of
// q1bias −128·Σ_e sign_e(n).
func q1_0Data() {
	sign := func(n, e int) int { return 2*(n>>e&1) - 1 }
	q1Signs = GLOBL("q1signs", attr.RODATA|attr.NOPTR)
	for n := 0; n < 16; n++ {
		for e := 0; e < 4; e++ {
			DATA(4*n+e, U8(uint8(int8(sign(n, e)))))
		}
	}
	q1Bias = GLOBL("q1bias", attr.RODATA|attr.NOPTR)
	for n := 0; n < 16; n++ {
		sum := 0
		for e := 0; e < 4; e++ {
			sum += sign(n, e)
		}
		DATA(4*n, U32(uint32(int32(-128*sum))))
	}
}

// vpdpbusd emits VPDPBUSD s, u, acc: acc += Σ₄ u(u8)·s(s8) per lane (avo
// v0.5.0 predates AVX512_VNNI).
func vpdpbusd(s, u, acc reg.VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []Op{s, u, acc},
		Inputs:   []Op{s, u, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI"},
	})
}

// q1_0Tables generates q1_0Tables: for each Q8_0 block of x (34 bytes: f16
// d, 32 int8 q) and each of its 8 groups, the 16 floats d·Σ_e sign_e(n)·q_e
// (n = 0…15) at tab + 64·group. With u = q + 128 as unsigned bytes,
// Σ sign·q = Σ sign·u − 128·Σ sign, so one VPDPBUSD from the bias gives
// the exact sum.
func q1_0Tables() {
	TEXT("q1_0Tables", NOSPLIT, "func(x *byte, blocks int, tab *byte)")
	Doc("q1_0Tables writes the Q1_0 kernels' lookup tables of one token's Q8_0 activations (blocks × 32).")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	blocks := Load(Param("blocks"), GP64())
	tab := Load(Param("tab"), GP64())
	signs, bias, flip := ZMM(), ZMM(), ZMM()
	VMOVDQU64(q1Signs, signs)
	VMOVDQU64(q1Bias, bias)
	c := GP32()
	MOVL(U32(0x80808080), c)
	VPBROADCASTD(c, flip)
	Label("tblock")
	d := ZMM()
	h := GP32()
	MOVWLZX(Mem{Base: x}, h)
	VMOVD(h, d.AsX())
	VCVTPH2PS(d.AsX(), d.AsX())
	VBROADCASTSS(d.AsX(), d)
	for j := 0; j < 8; j++ {
		u, s := ZMM(), ZMM()
		VPBROADCASTD(Mem{Base: x, Disp: 2 + 4*j}, u)
		VPXORD(flip, u, u)
		VMOVDQA64(bias, s)
		vpdpbusd(signs, u, s)
		VCVTDQ2PS(s, s)
		VMULPS(d, s, s)
		VMOVUPS(s, Mem{Base: tab, Disp: 64 * j})
	}
	ADDQ(U8(34), x)
	ADDQ(U32(512), tab)
	DECQ(blocks)
	JNZ(LabelRef("tblock"))
	VZEROUPPER()
	RET()
}

// q1_0TablesAVX2 generates q1_0TablesAVX2, q1_0Tables for CPUs without
// AVX-512: VPMADDUBSW and VPMADDWD by ones instead of VPDPBUSD (the pair
// sums |u·sign| ≤ 510 cannot saturate), 8 entries per register.
func q1_0TablesAVX2() {
	TEXT("q1_0TablesAVX2", NOSPLIT, "func(x *byte, blocks int, tab *byte)")
	Doc("q1_0TablesAVX2 is q1_0Tables with AVX2.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	blocks := Load(Param("blocks"), GP64())
	tab := Load(Param("tab"), GP64())
	signs, bias := [2]reg.VecVirtual{YMM(), YMM()}, [2]reg.VecVirtual{YMM(), YMM()}
	for h := 0; h < 2; h++ {
		VMOVDQU(q1Signs.Offset(32*h), signs[h])
		VMOVDQU(q1Bias.Offset(32*h), bias[h])
	}
	flip, ones := YMM(), YMM()
	c := GP32()
	MOVL(U32(0x80808080), c)
	VMOVD(c, flip.AsX())
	VPBROADCASTD(flip.AsX(), flip)
	MOVL(U32(0x00010001), c)
	VMOVD(c, ones.AsX())
	VPBROADCASTD(ones.AsX(), ones)
	Label("tblock")
	d := YMM()
	h := GP32()
	MOVWLZX(Mem{Base: x}, h)
	VMOVD(h, d.AsX())
	VCVTPH2PS(d.AsX(), d.AsX())
	VBROADCASTSS(d.AsX(), d)
	for j := 0; j < 8; j++ {
		u := YMM()
		VPBROADCASTD(Mem{Base: x, Disp: 2 + 4*j}, u)
		VPXOR(flip, u, u)
		for h := 0; h < 2; h++ {
			s := YMM()
			VPMADDUBSW(signs[h], u, s)
			VPMADDWD(ones, s, s)
			VPADDD(bias[h], s, s)
			VCVTDQ2PS(s, s)
			VMULPS(d, s, s)
			VMOVUPS(s, Mem{Base: tab, Disp: 64*j + 32*h})
		}
	}
	ADDQ(U8(34), x)
	ADDQ(U32(512), tab)
	DECQ(blocks)
	JNZ(LabelRef("tblock"))
	VZEROUPPER()
	RET()
}

// q1_0Kernel generates q1_0x16t<T>: for `groups` packed 16-row groups
// (wstride bytes apart) × `blocks` blocks × T tokens (tables tstride bytes
// apart). The eight lane accumulators of each group and token live in
// registers while the blocks run; between calls over consecutive column
// tiles they wait in acc (8·T zmm per group): flags bit 0 starts them at
// zero instead, bit 1 ends with the reduction into y (16 rows per group,
// token t at y + t·ldy), under rowMask for the last group. The tiles keep
// the tables the groups share in L1.
//
// The adds of sub-blocks fmaAdds run as FMAs by one (exact: p·1 is p),
// which issue to other ports than the adds and the index shifts.
func q1_0Kernel(T int, fmaAdds []int) {
	name := fmt.Sprintf("q1_0x16t%d", T)
	TEXT(name, NOSPLIT, "func(w *byte, wstride int, groups int, blocks int, tab *byte, tstride int, acc *float32, flags int, y *float32, ldy int, rowMask uint16, pf int)")
	Doc(fmt.Sprintf("%s computes groups × 16 rows × %d tokens of a Q1_0 · Q8_0 product over one tile of blocks (see asm/q1_0.go).", name, T))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	groups := Load(Param("groups"), GP64())
	accp := Load(Param("acc"), GP64())
	y := Load(Param("y"), GP64())

	one := ZMM()
	c := GP32()
	MOVL(U32(0x3f800000), c)
	VPBROADCASTD(c, one)
	a := make([][]reg.VecVirtual, 8) // [lane][token]
	for l := range a {
		a[l] = make([]reg.VecVirtual, T)
		for t := range a[l] {
			a[l][t] = ZMM()
		}
	}
	Label("group")
	flags := Load(Param("flags"), GP64())
	TESTQ(U32(1), flags)
	JZ(LabelRef("load"))
	for l := range a {
		for t := range a[l] {
			VPXORD(a[l][t], a[l][t], a[l][t])
		}
	}
	JMP(LabelRef("blocks"))
	Label("load")
	for l := range a {
		for t := range a[l] {
			VMOVUPS(Mem{Base: accp, Disp: 64 * (T*l + t)}, a[l][t])
		}
	}
	Label("blocks")
	wp, n := GP64(), Load(Param("blocks"), GP64())
	MOVQ(w, wp)
	tp := make([]reg.Register, T)
	tp[0] = Load(Param("tab"), GP64())
	if T > 1 {
		ts := Load(Param("tstride"), GP64())
		for t := 1; t < T; t++ {
			tp[t] = GP64()
			LEAQ(Mem{Base: tp[t-1], Index: ts, Scale: 1}, tp[t])
		}
	}
	pf := Load(Param("pf"), GP64())
	Label("block")
	for off := 0; off < 288; off += 64 {
		PREFETCHT0(Mem{Base: wp, Index: pf, Scale: 1, Disp: off})
	}
	W := make([]reg.VecVirtual, 4)
	for k := range W {
		W[k] = ZMM()
		VMOVDQU64(Mem{Base: wp, Disp: 64 * k}, W[k])
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: wp, Disp: 256}, dw)
	for l := 0; l < 8; l++ {
		blk := make([]reg.VecVirtual, T)
		for k := 0; k < 4; k++ {
			idx := W[k]
			if l > 0 {
				idx = ZMM()
				VPSRLD(U8(4*l), W[k], idx)
			}
			for t := 0; t < T; t++ {
				m := Mem{Base: tp[t], Disp: 64 * (8*k + l)}
				if k == 0 {
					blk[t] = ZMM()
					VPERMPS(m, idx, blk[t])
					continue
				}
				p := ZMM()
				VPERMPS(m, idx, p)
				if slices.Contains(fmaAdds, k) {
					VFMADD231PS(p, one, blk[t])
				} else {
					VADDPS(p, blk[t], blk[t])
				}
			}
		}
		for t := 0; t < T; t++ {
			VFMADD231PS(blk[t], dw, a[l][t])
		}
	}
	ADDQ(U32(288), wp)
	for t := range tp {
		ADDQ(U32(2048), tp[t])
	}
	DECQ(n)
	JNZ(LabelRef("block"))

	flags = Load(Param("flags"), GP64())
	TESTQ(U32(2), flags)
	JNZ(LabelRef("reduce"))
	for l := range a {
		for t := range a[l] {
			VMOVUPS(a[l][t], Mem{Base: accp, Disp: 64 * (T*l + t)})
		}
	}
	JMP(LabelRef("next"))
	Label("reduce")
	// hsum_float_8's tree over the lanes, per token.
	mask := K()
	KXNORW(mask, mask, mask)
	CMPQ(groups, U8(1))
	JNE(LabelRef("store"))
	rm := Load(Param("rowMask"), GP32())
	KMOVW(rm, mask)
	Label("store")
	out := GP64()
	MOVQ(y, out)
	ldy := Load(Param("ldy"), GP64())
	for t := 0; t < T; t++ {
		VADDPS(a[4][t], a[0][t], a[0][t])
		VADDPS(a[6][t], a[2][t], a[2][t])
		VADDPS(a[2][t], a[0][t], a[0][t])
		VADDPS(a[5][t], a[1][t], a[1][t])
		VADDPS(a[7][t], a[3][t], a[3][t])
		VADDPS(a[3][t], a[1][t], a[1][t])
		VADDPS(a[1][t], a[0][t], a[0][t])
		VMOVUPS(a[0][t], mask, Mem{Base: out})
		if t+1 < T {
			ADDQ(ldy, out)
		}
	}
	ADDQ(U8(64), y)
	Label("next")
	ADDQ(U32(64*8*T), accp)
	wstride := Load(Param("wstride"), GP64())
	ADDQ(wstride, w)
	DECQ(groups)
	JNZ(LabelRef("group"))
	VZEROUPPER()
	RET()
}

// q1_0PairKernel generates q1_0x16p<T>, q1_0Kernel for prompts: T tokens
// share each index shift, which leaves registers for four lanes of every
// token, so each tile runs twice per group, over the even lanes and then
// the odd ones, and ggml's tree splits the same way: ((a4+a0)+(a6+a2)) from
// the first pass plus ((a5+a1)+(a7+a3)) from the second. acc holds 8·T zmm
// per group as for q1_0Kernel.
func q1_0PairKernel(T int, fmaAdds []int) {
	name := fmt.Sprintf("q1_0x16p%d", T)
	TEXT(name, NOSPLIT, "func(w *byte, wstride int, groups int, blocks int, tab *byte, tstride int, acc *float32, flags int, y *float32, ldy int, rowMask uint16, pf int)")
	Doc(fmt.Sprintf("%s computes groups × 16 rows × %d tokens of a Q1_0 · Q8_0 product over one tile of blocks in two passes (see asm/q1_0.go).", name, T))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	groups := Load(Param("groups"), GP64())
	accp := Load(Param("acc"), GP64())
	y := Load(Param("y"), GP64())
	// Copies of one zero start the accumulators: a VPXORD of a register
	// with itself reads it, and the allocator would keep both passes'
	// accumulators live from the entry.
	zero, one := ZMM(), ZMM()
	VPXORD(zero, zero, zero)
	c := GP32()
	MOVL(U32(0x3f800000), c)
	VPBROADCASTD(c, one)
	slot := func(l, t int) Mem { return Mem{Base: accp, Disp: 64 * (T*l + t)} }

	Label("group")
	for pass, lanes := range [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}} {
		a := map[int][]reg.VecVirtual{}
		for _, l := range lanes {
			a[l] = make([]reg.VecVirtual, T)
			for t := range a[l] {
				a[l][t] = ZMM()
			}
		}
		flags := Load(Param("flags"), GP64())
		zeroL, loaded := fmt.Sprintf("zero%d", pass), fmt.Sprintf("loaded%d", pass)
		TESTQ(U32(1), flags)
		JNZ(LabelRef(zeroL))
		for _, l := range lanes {
			for t := range a[l] {
				VMOVUPS(slot(l, t), a[l][t])
			}
		}
		JMP(LabelRef(loaded))
		Label(zeroL)
		for _, l := range lanes {
			for t := range a[l] {
				VMOVAPS(zero, a[l][t])
			}
		}
		Label(loaded)
		wp, n := GP64(), Load(Param("blocks"), GP64())
		MOVQ(w, wp)
		tp := make([]reg.Register, T)
		tp[0] = Load(Param("tab"), GP64())
		ts := Load(Param("tstride"), GP64())
		for t := 1; t < T; t++ {
			tp[t] = GP64()
			LEAQ(Mem{Base: tp[t-1], Index: ts, Scale: 1}, tp[t])
		}
		var pf reg.Register
		if pass == 0 {
			pf = Load(Param("pf"), GP64())
		}
		label := fmt.Sprintf("block%d", pass)
		Label(label)
		if pass == 0 {
			for off := 0; off < 288; off += 64 {
				PREFETCHT0(Mem{Base: wp, Index: pf, Scale: 1, Disp: off})
			}
		}
		W := make([]reg.VecVirtual, 4)
		for k := range W {
			W[k] = ZMM()
			VMOVDQU64(Mem{Base: wp, Disp: 64 * k}, W[k])
		}
		dw := ZMM()
		VCVTPH2PS(Mem{Base: wp, Disp: 256}, dw)
		for _, l := range lanes {
			blk := make([]reg.VecVirtual, T)
			for k := 0; k < 4; k++ {
				idx := W[k]
				if l > 0 {
					idx = ZMM()
					VPSRLD(U8(4*l), W[k], idx)
				}
				for t := 0; t < T; t++ {
					m := Mem{Base: tp[t], Disp: 64 * (8*k + l)}
					if k == 0 {
						blk[t] = ZMM()
						VPERMPS(m, idx, blk[t])
						continue
					}
					p := ZMM()
					VPERMPS(m, idx, p)
					if slices.Contains(fmaAdds, k) {
						VFMADD231PS(p, one, blk[t])
					} else {
						VADDPS(p, blk[t], blk[t])
					}
				}
			}
			for t := 0; t < T; t++ {
				VFMADD231PS(blk[t], dw, a[l][t])
			}
		}
		ADDQ(U32(288), wp)
		for t := range tp {
			ADDQ(U32(2048), tp[t])
		}
		DECQ(n)
		JNZ(LabelRef(label))

		// Not the last tile: keep the lanes. The last: this pass's half
		// of the tree, kept in lane l0's slot (the first pass's) or added
		// to it and stored (the second's).
		flags = Load(Param("flags"), GP64())
		keep, done := fmt.Sprintf("keep%d", pass), fmt.Sprintf("done%d", pass)
		TESTQ(U32(2), flags)
		JZ(LabelRef(keep))
		for t := 0; t < T; t++ {
			h := a[lanes[0]][t]
			VADDPS(a[lanes[2]][t], h, h)                           // a4+a0 or a5+a1
			VADDPS(a[lanes[3]][t], a[lanes[1]][t], a[lanes[1]][t]) // a6+a2 or a7+a3
			VADDPS(a[lanes[1]][t], h, h)
			if pass == 0 {
				VMOVUPS(h, slot(0, t))
			} else {
				VADDPS(slot(0, t), h, h)
				VMOVUPS(h, slot(1, t))
			}
		}
		JMP(LabelRef(done))
		Label(keep)
		for _, l := range lanes {
			for t := range a[l] {
				VMOVUPS(a[l][t], slot(l, t))
			}
		}
		Label(done)
	}

	flags := Load(Param("flags"), GP64())
	TESTQ(U32(2), flags)
	JZ(LabelRef("next"))
	mask := K()
	KXNORW(mask, mask, mask)
	CMPQ(groups, U8(1))
	JNE(LabelRef("store"))
	rm := Load(Param("rowMask"), GP32())
	KMOVW(rm, mask)
	Label("store")
	out := GP64()
	MOVQ(y, out)
	ldy := Load(Param("ldy"), GP64())
	for t := 0; t < T; t++ {
		v := ZMM()
		VMOVUPS(slot(1, t), v)
		VMOVUPS(v, mask, Mem{Base: out})
		if t+1 < T {
			ADDQ(ldy, out)
		}
	}
	ADDQ(U8(64), y)
	Label("next")
	ADDQ(U32(64*8*T), accp)
	wstride := Load(Param("wstride"), GP64())
	ADDQ(wstride, w)
	DECQ(groups)
	JNZ(LabelRef("group"))
	VZEROUPPER()
	RET()
}

var q1NegOne Mem

// q1_0AVX2Data emits the AVX2 kernels' constant: eight −1.0.
func q1_0AVX2Data() {
	q1NegOne = GLOBL("q1negone", attr.RODATA|attr.NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0xbf800000))
	}
}

// q1_0AVX2Kernel generates q1_0x16avx2t<T>, q1_0Kernel for CPUs with AVX2
// and FMA but not AVX-512, over the same tiles and flags, with one change
// of layout (repack.go's q1AVX2Nibbles): a pattern n whose bit 3 is set is
// stored as n XOR 7. VPERMPS on a YMM reads 3 bits of each index, so it
// looks up entries 0–7 of a group's table, the patterns whose column 3
// weight is −1; the other patterns are their complements, whose product is
// the negation (d_x·Σ±q with every sign flipped): entry (n XOR 15) mod 8
// = (n mod 8) XOR 7 is what the stored index reads for such an n, and
// bit 3, moved to the sign bit, turns the FMA's factor from +1 into −1
// (p·±1 is exact, so each FMA rounds as ggml's add does).
//
// With more than one token, the index and the sign of nibble l come from
// unaligned loads (one shift per lane instead of two), which read up to 3
// bytes before a block: the packed copy has padding in front.
//
// A group's two 8-row halves (rows 0–7 at w, rows 8–15 32 bytes on) run
// one after the other over the tile, so the second reads the weights from
// L1. One token keeps the eight lanes' accumulators of a half in
// registers; more tokens run the tile once per lane, T accumulators
// each, so that the T tokens share each lane's index and sign. Between
// tiles and lanes the accumulators wait in acc (16 lanes × T ymm per
// group: half h, lane l, token t at 32·((8h+l)·T+t)).
func q1_0AVX2Kernel(T int) {
	name := fmt.Sprintf("q1_0x16avx2t%d", T)
	TEXT(name, NOSPLIT, "func(w *byte, wstride int, groups int, blocks int, tab *byte, tstride int, acc *float32, flags int, y *float32, ldy int, pf int)")
	Doc(fmt.Sprintf("%s computes groups × 16 rows × %d tokens of a Q1_0 · Q8_0 product over one tile of blocks with AVX2 (see asm/q1_0.go).", name, T))
	Pragma("noescape")
	slot := func(accp reg.Register, h, l, t int) Mem { return Mem{Base: accp, Disp: 32 * ((8*h+l)*T + t)} }
	one := YMM()
	c := GP32()
	MOVL(U32(0x3f800000), c)
	VMOVD(c, one.AsX())
	VPBROADCASTD(one.AsX(), one)
	var negOne Op = q1NegOne
	if T == 1 { // a register to spare: one load less per lookup
		r := YMM()
		VMOVUPS(q1NegOne, r)
		negOne = r
	}
	passes := [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}
	if T > 1 {
		passes = [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}
	}

	Label("group")
	for h := range 2 {
		for pi, lanes := range passes {
			lbl := func(s string) string { return fmt.Sprintf("%s%d_%d", s, h, pi) }
			accp := Load(Param("acc"), GP64())
			a := map[int][]reg.VecVirtual{}
			for _, l := range lanes {
				a[l] = make([]reg.VecVirtual, T)
				for t := range a[l] {
					a[l][t] = YMM()
				}
			}
			flags := Load(Param("flags"), GP64())
			TESTQ(U32(1), flags)
			JZ(LabelRef(lbl("load")))
			for _, l := range lanes {
				for _, v := range a[l] {
					VXORPS(v, v, v)
				}
			}
			JMP(LabelRef(lbl("blocks")))
			Label(lbl("load"))
			for _, l := range lanes {
				for t, v := range a[l] {
					VMOVUPS(slot(accp, h, l, t), v)
				}
			}
			Label(lbl("blocks"))
			wp, n := Load(Param("w"), GP64()), Load(Param("blocks"), GP64())
			if h == 1 {
				ADDQ(U8(32), wp)
			}
			tp := make([]reg.Register, T)
			tp[0] = Load(Param("tab"), GP64())
			if T > 1 {
				ts := Load(Param("tstride"), GP64())
				for t := 1; t < T; t++ {
					tp[t] = GP64()
					LEAQ(Mem{Base: tp[t-1], Index: ts, Scale: 1}, tp[t])
				}
			}
			var pf reg.Register
			if h == 0 && pi == 0 {
				pf = Load(Param("pf"), GP64())
			}
			Label(lbl("block"))
			if pf != nil {
				for off := 0; off < 288; off += 64 {
					PREFETCHT0(Mem{Base: wp, Index: pf, Scale: 1, Disp: off})
				}
			}
			dw := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 256 - 16*h}, dw) // this half's 8 scales
			for _, l := range lanes {
				blk := make([]reg.VecVirtual, T)
				for k := 0; k < 4; k++ {
					// One token, bound by loads: the chunk's dwords,
					// shifted for the index and the sign. More tokens,
					// bound by shifts: nibble l is in byte l/2 of its
					// row's dword, and a load l/2 bytes on puts that byte
					// lowest, one l/2−3 bytes on (the bytes before a
					// block are the previous block's, or the padding
					// before the first) highest.
					idx, sgn := YMM(), YMM()
					if T == 1 {
						VMOVDQU(Mem{Base: wp, Disp: 64 * k}, idx)
						VPSLLD(U8(28-4*l), idx, sgn)
						if l > 0 {
							VPSRLD(U8(4*l), idx, idx)
						}
					} else {
						VMOVDQU(Mem{Base: wp, Disp: 64*k + l/2}, idx)
						if l%2 == 0 {
							VPSLLD(U8(28), idx, sgn) // bit 3 to the sign
						} else {
							VMOVDQU(Mem{Base: wp, Disp: 64*k + l/2 - 3}, sgn) // bit 7 is the sign
							VPSRLD(U8(4), idx, idx)
						}
					}
					VBLENDVPS(sgn, negOne, one, sgn)
					for t := 0; t < T; t++ {
						m := Mem{Base: tp[t], Disp: 64 * (8*k + l)}
						if k == 0 {
							blk[t] = YMM()
							VPERMPS(m, idx, blk[t])
							VMULPS(sgn, blk[t], blk[t])
							continue
						}
						p := YMM()
						VPERMPS(m, idx, p)
						VFMADD231PS(p, sgn, blk[t])
					}
				}
				for t := 0; t < T; t++ {
					VFMADD231PS(blk[t], dw, a[l][t])
				}
			}
			ADDQ(U32(288), wp)
			for t := range tp {
				ADDQ(U32(2048), tp[t])
			}
			DECQ(n)
			JNZ(LabelRef(lbl("block")))
			for _, l := range lanes {
				for t, v := range a[l] {
					VMOVUPS(v, slot(accp, h, l, t))
				}
			}
		}
	}

	accp := Load(Param("acc"), GP64())
	flags := Load(Param("flags"), GP64())
	TESTQ(U32(2), flags)
	JZ(LabelRef("next"))
	// hsum_float_8's tree over the lanes, per half and token.
	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	out := GP64()
	MOVQ(y, out)
	for t := 0; t < T; t++ {
		for h := range 2 {
			s := make([]reg.VecVirtual, 8)
			for l := range s {
				s[l] = YMM()
				VMOVUPS(slot(accp, h, l, t), s[l])
			}
			VADDPS(s[4], s[0], s[0])
			VADDPS(s[6], s[2], s[2])
			VADDPS(s[2], s[0], s[0])
			VADDPS(s[5], s[1], s[1])
			VADDPS(s[7], s[3], s[3])
			VADDPS(s[3], s[1], s[1])
			VADDPS(s[1], s[0], s[0])
			VMOVUPS(s[0], Mem{Base: out, Disp: 32 * h})
		}
		if t+1 < T {
			ADDQ(ldy, out)
		}
	}
	ADDQ(U8(64), y)
	Store(y, Param("y"))
	Label("next")
	ADDQ(U32(512*T), accp)
	Store(accp, Param("acc"))
	w := Load(Param("w"), GP64())
	wstride := Load(Param("wstride"), GP64())
	ADDQ(wstride, w)
	Store(w, Param("w"))
	groups := Load(Param("groups"), GP64())
	DECQ(groups)
	Store(groups, Param("groups"))
	JNZ(LabelRef("group"))
	VZEROUPPER()
	RET()
}
