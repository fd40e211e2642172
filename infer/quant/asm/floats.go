package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// f32, f16 and bf16 matrix kernels in the orders of infer/quant/floats.go
// (llama.cpp's): each output keeps a accumulators of 16 float32 lanes, one
// ZMM or two YMMs (lanes 0–7, 8–15), which take the a consecutive chunks of
// each step by fused multiply-adds:
//
//	f32:  a chunk is 16 elements, lane l gets element l;
//	f16:  the same, converted (products of f16s are exact, so an FMA
//	      rounds as the add alone would);
//	bf16: a chunk is 32 elements, lane j gets element 2j+1, then 2j
//	      (VDPBF16PS's order, emulated: the odd element of a pair is its
//	      high half, the even one its low half shifted up).
//
// Then a = 4: (a0 + a2) + (a1 + a3) lane by lane and the 16-lane tree; a =
// 2: the two trees added; a = 1: the tree. Rows and tokens come R × T at a
// time, their pointers ldw and ldx bytes apart; y[t·ldy + 4r] is stored.

// floatKernel describes one generated kernel.
type floatKernel struct {
	name   string
	typ    string // f32, f16 or bf16
	zmm    bool
	a      int // accumulators per output
	rows   int
	tokens int
}

var bf16High Mem

// floatKernels emits the f32, f16 and bf16 kernels: for AVX-512 4 rows × 1
// token (one-token order) and 4 rows × 4 or 1 tokens (tinyBLAS order), for
// AVX2 1 (f32, f16) or 2 (bf16) rows × 1 token and 2 rows × 2 or 1 tokens.
func floatKernels() {
	bf16High = GLOBL("bf16high", attr.RODATA|attr.NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0xffff0000))
	}
	for _, k := range []floatKernel{
		{"f32x4dot512", "f32", true, 4, 4, 1},
		{"f32x4t4gemm512", "f32", true, 1, 4, 4},
		{"f32x4t1gemm512", "f32", true, 1, 4, 1},
		{"f16x4dot512", "f16", true, 4, 4, 1},
		{"f16x4t4gemm512", "f16", true, 1, 4, 4},
		{"f16x4t1gemm512", "f16", true, 1, 4, 1},
		{"bf16x4dot512", "bf16", true, 2, 4, 1},
		{"bf16x4t4gemm512", "bf16", true, 1, 4, 4},
		{"bf16x4t1gemm512", "bf16", true, 1, 4, 1},
		{"f32x1dotavx2", "f32", false, 4, 1, 1},
		{"f32x2t2gemmavx2", "f32", false, 1, 2, 2},
		{"f32x2t1gemmavx2", "f32", false, 1, 2, 1},
		{"f16x1dotavx2", "f16", false, 4, 1, 1},
		{"f16x2t2gemmavx2", "f16", false, 1, 2, 2},
		{"f16x2t1gemmavx2", "f16", false, 1, 2, 1},
		{"bf16x2dotavx2", "bf16", false, 2, 2, 1},
		{"bf16x2t2gemmavx2", "bf16", false, 1, 2, 2},
		{"bf16x2t1gemmavx2", "bf16", false, 1, 2, 1},
	} {
		k.generate()
	}
}

func (k floatKernel) generate() {
	TEXT(k.name, NOSPLIT, "func(w *byte, ldw int, x *byte, ldx int, steps int, y *float32, ldy int)")
	Doc(fmt.Sprintf("%s computes %d rows × %d tokens of a %s product, %d accumulators per output.", k.name, k.rows, k.tokens, k.typ, k.a))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	x := Load(Param("x"), GP64())
	ldx := Load(Param("ldx"), GP64())
	steps := Load(Param("steps"), GP64())
	wr, xt := pointers(w, ldw, k.rows), pointers(x, ldx, k.tokens)

	parts, chunk := 2, 32 // YMM halves; bytes per chunk
	newVec := func() reg.VecVirtual { return YMM() }
	if k.zmm {
		parts, newVec = 1, ZMM
	}
	if k.typ != "f16" {
		chunk = 64
	}
	var high reg.VecVirtual
	if k.typ == "bf16" && k.zmm {
		r := GP32()
		MOVL(U32(0xffff0000), r)
		high = ZMM()
		VPBROADCASTD(r, high)
	}
	// acc[r][t][a][p]
	acc := make([][][][]reg.VecVirtual, k.rows)
	for r := range acc {
		acc[r] = make([][][]reg.VecVirtual, k.tokens)
		for t := range acc[r] {
			acc[r][t] = make([][]reg.VecVirtual, k.a)
			for a := range acc[r][t] {
				acc[r][t][a] = make([]reg.VecVirtual, parts)
				for p := range acc[r][t][a] {
					v := newVec()
					VXORPS(v, v, v)
					acc[r][t][a][p] = v
				}
			}
		}
	}
	// load returns the lanes of part p of the chunk at m: one vector for
	// f32 and f16, the odd and the even elements for bf16.
	load := func(m Mem) []reg.VecVirtual {
		switch k.typ {
		case "f32":
			v := newVec()
			VMOVUPS(m, v)
			return []reg.VecVirtual{v}
		case "f16":
			v := newVec()
			VCVTPH2PS(m, v)
			return []reg.VecVirtual{v}
		}
		v, odd, even := newVec(), newVec(), newVec()
		if k.zmm {
			VMOVDQU32(m, v)
			VPANDD(high, v, odd)
		} else {
			VMOVDQU(m, v)
			VPAND(bf16High, v, odd)
		}
		VPSLLD(U8(16), v, even)
		return []reg.VecVirtual{odd, even}
	}
	partBytes := chunk / parts

	Label("step")
	for a := 0; a < k.a; a++ {
		for p := 0; p < parts; p++ {
			off := a*chunk + p*partBytes
			xs := make([][]reg.VecVirtual, k.tokens)
			for t := range xs {
				xs[t] = load(Mem{Base: xt[t], Disp: off})
			}
			for r := 0; r < k.rows; r++ {
				ws := load(Mem{Base: wr[r], Disp: off})
				for t := 0; t < k.tokens; t++ {
					for i := range ws { // bf16: odd, then even
						VFMADD231PS(xs[t][i], ws[i], acc[r][t][a][p])
					}
				}
			}
		}
	}
	for _, p := range append(wr, xt...) {
		ADDQ(U32(k.a*chunk), p)
	}
	DECQ(steps)
	JNZ(LabelRef("step"))

	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	for t := 0; t < k.tokens; t++ {
		for r := 0; r < k.rows; r++ {
			out := k.combine(acc[r][t])
			VMOVSS(out, Mem{Base: y, Disp: 4 * r})
		}
		if t+1 < k.tokens {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// pointers returns n GP registers holding base + i·stride.
func pointers(base, stride reg.Register, n int) []reg.Register {
	ps := []reg.Register{base}
	for i := 1; i < n; i++ {
		p := GP64()
		MOVQ(ps[i-1], p)
		ADDQ(stride, p)
		ps = append(ps, p)
	}
	return ps
}

// combine folds one output's accumulators (acc[a][p]) into a scalar, in
// the low float of the returned XMM.
func (k floatKernel) combine(acc [][]reg.VecVirtual) reg.Register {
	if k.a == 4 {
		for p := range acc[0] {
			VADDPS(acc[2][p], acc[0][p], acc[0][p])
			VADDPS(acc[3][p], acc[1][p], acc[1][p])
			VADDPS(acc[1][p], acc[0][p], acc[0][p])
		}
	}
	s := k.tree(acc[0])
	if k.a == 2 {
		VADDSS(k.tree(acc[1]), s, s)
	}
	return s
}

// tree emits the 16-lane tree of _mm512_reduce_add_ps (Reduce16) over one
// ZMM or a pair of YMMs.
func (k floatKernel) tree(v []reg.VecVirtual) reg.Register {
	if k.zmm {
		reduce16(v[0])
		return v[0].AsX()
	}
	lo := v[0]
	VADDPS(v[1], lo, lo) // lanes i + i+8
	hx, lx := XMM(), lo.AsX()
	VEXTRACTF128(U8(1), lo, hx)
	VADDPS(hx, lx, lx)
	VMOVHLPS(lx, lx, hx)
	VADDPS(hx, lx, lx)
	VMOVSHDUP(lx, hx)
	VADDSS(hx, lx, lx)
	return lx
}
