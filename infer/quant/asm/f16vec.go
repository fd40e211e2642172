package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The decode-step attention products in the order of ggml_vec_dot_f16 on
// AVX-512 (no AVX512-FP16), which llama.cpp runs for a single query token
// (tinyBLAS declines products of one): four 16-lane accumulators, lane l
// of accumulator j taking the elements ≡ 16j+l mod 64 in order, then
// (a0+a2)+(a1+a3) lane by lane and the tree of _mm512_reduce_add_ps.

// dotsF16Vec generates dotsF16Vec: out[t] = Σ_d x[d]·f16(h[t·stride + d])
// for t < n, d < 64·chunks (the scores), two rows at a time.
func dotsF16Vec() {
	TEXT("dotsF16Vec", NOSPLIT, "func(x *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("dotsF16Vec computes n dot products of x (64·chunks floats) with f16 rows of h, stride elements apart, in ggml_vec_dot_f16's order.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	chunks := Load(Param("chunks"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride) // bytes
	rows := func(label string, R int) {
		Label(label)
		acc := make([][4]reg.VecVirtual, R)
		for r := range acc {
			for j := range acc[r] {
				acc[r][j] = ZMM()
				VPXORD(acc[r][j], acc[r][j], acc[r][j])
			}
		}
		i, xp, hp := GP64(), GP64(), GP64()
		MOVQ(chunks, i)
		MOVQ(x, xp)
		MOVQ(h, hp)
		Label(label + "chunk")
		row := GP64()
		MOVQ(hp, row)
		for r := range acc {
			for j := range acc[r] {
				k := ZMM()
				VCVTPH2PS(Mem{Base: row, Disp: 32 * j}, k)
				VFMADD231PS(Mem{Base: xp, Disp: 64 * j}, k, acc[r][j])
			}
			if r < R-1 {
				ADDQ(stride, row)
			}
		}
		ADDQ(U8(128), hp)
		ADDQ(U32(256), xp)
		DECQ(i)
		JNZ(LabelRef(label + "chunk"))
		for r := range acc {
			a := acc[r]
			VADDPS(a[2], a[0], a[0])
			VADDPS(a[3], a[1], a[1])
			VADDPS(a[1], a[0], a[0])
			reduce16(a[0])
			VMOVSS(a[0].AsX(), Mem{Base: out, Disp: 4 * r})
		}
		ADDQ(U8(4*R), out)
		for r := 0; r < R; r++ {
			ADDQ(stride, h)
		}
	}
	CMPQ(n, U8(2))
	JB(LabelRef("single"))
	rows("pair", 2)
	SUBQ(U8(2), n)
	CMPQ(n, U8(2))
	JAE(LabelRef("pair"))
	Label("single")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	rows("one", 1)
	Label("done")
	VZEROUPPER()
	RET()
}

// weightedSumF16Vec generates weightedSumF16Vec: out[d] = Σ_t
// p[t]·f16(h[t·stride + d]) for t < n, d < 16·chunks (probabilities times
// values), sixteen outputs at a time. The 64 lanes t mod 64 of the sixteen
// outputs live in a 4 KiB frame (slot t mod 64, 16 outputs wide) so that
// the rows stream in order; then lane l of the four accumulators combines
// as (a0+a2)+(a1+a3) and the tree over l runs as vertical adds.
func weightedSumF16Vec() {
	// Not NOSPLIT: the frame is larger than a nosplit function may have.
	TEXT("weightedSumF16Vec", 0, "func(p *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("weightedSumF16Vec sets out (16·chunks floats) to Σ_t p[t]·row t of h (f16, stride elements apart), t < n, in ggml_vec_dot_f16's order.")
	Pragma("noescape")
	frame := AllocLocal(64 * 64)
	pp := Load(Param("p"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	chunks := Load(Param("chunks"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	base := GP64()
	LEAQ(frame, base)
	zero := ZMM()
	VPXORD(zero, zero, zero)

	Label("panel")
	for l := 0; l < 64; l++ {
		VMOVUPS(zero, Mem{Base: base, Disp: 64 * l})
	}
	t, ap, hp, slot := GP64(), GP64(), GP64(), GP64()
	XORQ(t, t)
	MOVQ(pp, ap)
	MOVQ(h, hp)
	TESTQ(n, n)
	JZ(LabelRef("combine"))
	Label("row")
	MOVQ(t, slot)
	ANDQ(U8(63), slot)
	SHLQ(U8(6), slot)
	v, b, m := ZMM(), ZMM(), ZMM()
	VCVTPH2PS(Mem{Base: hp}, v)
	VBROADCASTSS(Mem{Base: ap}, b)
	VMOVUPS(Mem{Base: base, Index: slot, Scale: 1}, m)
	VFMADD231PS(v, b, m)
	VMOVUPS(m, Mem{Base: base, Index: slot, Scale: 1})
	ADDQ(U8(4), ap)
	ADDQ(stride, hp)
	INCQ(t)
	CMPQ(t, n)
	JB(LabelRef("row"))

	Label("combine")
	d := make([]reg.VecVirtual, 16)
	for l := range d {
		var a [4]reg.VecVirtual
		for j := range a {
			a[j] = ZMM()
			VMOVUPS(Mem{Base: base, Disp: 64 * (16*j + l)}, a[j])
		}
		VADDPS(a[2], a[0], a[0])
		VADDPS(a[3], a[1], a[1])
		VADDPS(a[1], a[0], a[0])
		d[l] = a[0]
	}
	for l := 0; l < 8; l++ {
		VADDPS(d[l+8], d[l], d[l])
	}
	for l := 0; l < 4; l++ {
		VADDPS(d[l+4], d[l], d[l])
	}
	VADDPS(d[2], d[0], d[0])
	VADDPS(d[3], d[1], d[1])
	VADDPS(d[1], d[0], d[0])
	VMOVUPS(d[0], Mem{Base: out})
	ADDQ(U8(64), out)
	ADDQ(U8(32), h)
	DECQ(chunks)
	JNZ(LabelRef("panel"))
	VZEROUPPER()
	RET()
}
