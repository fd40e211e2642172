package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The attention helpers of f16vec.go for CPUs with AVX2, FMA and F16C but
// no AVX-512, in the same orders as the AVX-512 kernels (main.go, f16vec.go)
// and so with the same bits: each 16-lane accumulator is a pair of YMMs
// (lanes 0–7, 8–15), the 16-lane tree is floatKernel.tree's, and where the
// AVX-512 kernels merge-mask a tail these pad it with a weight of −0 and a
// value of +0, whose product −0 leaves every accumulator as it was (x + −0
// is x for every x, −0 and +0 included).

var f16Iota, f16NegZero Mem

// f16AVX2Data emits the constants: the int32 lane numbers 0…15 and
// sixteen −0s.
func f16AVX2Data() {
	f16Iota = GLOBL("f16iota", attr.RODATA|attr.NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(uint32(i)))
	}
	f16NegZero = GLOBL("f16negzero", attr.RODATA|attr.NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0x80000000))
	}
}

// f16AVX2Kernels emits the five AVX2 attention kernels.
func f16AVX2Kernels() {
	f16AVX2Data()
	dotsF16AVX2()
	weightedSumF16AVX2()
	weightedSumF16TAVX2()
	dotsF16VecAVX2()
	weightedSumF16VecAVX2()
}

// tree16 is the 16-lane tree of a YMM pair into the low float of lo.
func tree16(lo, hi reg.VecVirtual) reg.Register {
	return floatKernel{}.tree([]reg.VecVirtual{lo, hi})
}

// zeroY returns n zeroed YMMs.
func zeroY(n int) []reg.VecVirtual {
	v := make([]reg.VecVirtual, n)
	for i := range v {
		v[i] = YMM()
		VXORPS(v[i], v[i], v[i])
	}
	return v
}

// dotsF16AVX2 generates dotsF16AVX2, dotsF16 with AVX2: four rows at a
// time, each with its own chain of FMAs per lane.
func dotsF16AVX2() {
	TEXT("dotsF16AVX2", NOSPLIT, "func(x *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("dotsF16AVX2 is dotsF16 with AVX2.")
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
		acc := make([][]reg.VecVirtual, R)
		for r := range acc {
			acc[r] = zeroY(2)
		}
		i, xp, hp := GP64(), GP64(), GP64()
		MOVQ(chunks, i)
		MOVQ(x, xp)
		MOVQ(h, hp)
		Label(label + "chunk")
		xs := []reg.VecVirtual{YMM(), YMM()}
		VMOVUPS(Mem{Base: xp}, xs[0])
		VMOVUPS(Mem{Base: xp, Disp: 32}, xs[1])
		row := GP64()
		MOVQ(hp, row)
		for r := range acc {
			for p := range 2 {
				k := YMM()
				VCVTPH2PS(Mem{Base: row, Disp: 16 * p}, k)
				VFMADD231PS(xs[p], k, acc[r][p])
			}
			if r < R-1 {
				ADDQ(stride, row)
			}
		}
		ADDQ(U8(32), hp)
		ADDQ(U8(64), xp)
		DECQ(i)
		JNZ(LabelRef(label + "chunk"))
		for r := range acc {
			VMOVSS(tree16(acc[r][0], acc[r][1]), Mem{Base: out, Disp: 4 * r})
		}
		ADDQ(U8(4*R), out)
		for range R {
			ADDQ(stride, h)
		}
	}
	CMPQ(n, U8(4))
	JB(LabelRef("single"))
	rows("quad", 4)
	SUBQ(U8(4), n)
	CMPQ(n, U8(4))
	JAE(LabelRef("quad"))
	Label("single")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	rows("one", 1)
	DECQ(n)
	JNZ(LabelRef("one"))
	Label("done")
	VZEROUPPER()
	RET()
}

// weightedSumF16AVX2 generates weightedSumF16AVX2, weightedSumF16 with
// AVX2 over panels of eight outputs: register acc[l] holds lane l of the
// eight, and sixteen of them with the row and the weight would not fit in
// sixteen YMMs, so each panel runs twice, over the rows of lanes 0–7 (t mod
// 16 < 8; their accumulators wait in the frame) and then over those of
// lanes 8–15, whose accumulators meet them in the tree's first level.
func weightedSumF16AVX2() {
	TEXT("weightedSumF16AVX2", 0, "func(p *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("weightedSumF16AVX2 sets out (8·chunks floats) to Σ_t p[t]·row t of h (f16, stride elements apart), t < n, as weightedSumF16 does.")
	Pragma("noescape")
	frame := AllocLocal(8 * 32)
	pp := Load(Param("p"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	stride16 := GP64()
	MOVQ(stride, stride16)
	SHLQ(U8(4), stride16)

	Label("panel")
	for pass := range 2 {
		lbl := func(s string) string { return fmt.Sprintf("%s%d", s, pass) }
		acc := zeroY(8)
		t, ap, hp, row := GP64(), GP64(), GP64(), GP64()
		MOVQ(n, t)
		MOVQ(pp, ap)
		MOVQ(h, hp)
		if pass == 1 {
			ADDQ(U8(32), ap) // lane 8's weight
			for range 8 {
				ADDQ(stride, hp)
			}
		}
		CMPQ(t, U8(16))
		JB(LabelRef(lbl("tail")))
		Label(lbl("group"))
		MOVQ(hp, row)
		for l := range acc {
			v, b := YMM(), YMM()
			VCVTPH2PS(Mem{Base: row}, v)
			VBROADCASTSS(Mem{Base: ap, Disp: 4 * l}, b)
			VFMADD231PS(v, b, acc[l])
			if l < 7 {
				ADDQ(stride, row)
			}
		}
		ADDQ(U8(64), ap)
		ADDQ(stride16, hp)
		SUBQ(U8(16), t)
		CMPQ(t, U8(16))
		JAE(LabelRef(lbl("group")))
		// The last t < 16 rows feed lanes 0 … t−1: this pass's share.
		Label(lbl("tail"))
		if pass == 1 {
			CMPQ(t, U8(8))
			JBE(LabelRef(lbl("end")))
			SUBQ(U8(8), t)
		}
		lanes := 8
		if pass == 1 {
			lanes = 7 // at most 7 rows fall in lanes 8–14
		}
		for l := range lanes {
			TESTQ(t, t)
			JZ(LabelRef(lbl("end")))
			v, b := YMM(), YMM()
			VCVTPH2PS(Mem{Base: hp}, v)
			VBROADCASTSS(Mem{Base: ap, Disp: 4 * l}, b)
			VFMADD231PS(v, b, acc[l])
			ADDQ(stride, hp)
			DECQ(t)
		}
		Label(lbl("end"))
		if pass == 0 {
			for l, a := range acc {
				VMOVUPS(a, frame.Offset(32*l))
			}
			continue
		}
		for l, a := range acc {
			VADDPS(frame.Offset(32*l), a, a) // lane l + lane l+8
		}
		for l := range 4 {
			VADDPS(acc[l+4], acc[l], acc[l])
		}
		VADDPS(acc[2], acc[0], acc[0])
		VADDPS(acc[3], acc[1], acc[1])
		VADDPS(acc[1], acc[0], acc[0])
		VMOVUPS(acc[0], Mem{Base: out})
	}
	ADDQ(U8(32), out)
	ADDQ(U8(16), h)
	chunks := Load(Param("chunks"), GP64())
	DECQ(chunks)
	Store(chunks, Param("chunks"))
	JNZ(LabelRef("panel"))
	VZEROUPPER()
	RET()
}

// weightedSumF16TAVX2 generates weightedSumF16TAVX2, weightedSumF16T with
// AVX2. The last tail < 16 positions of each row are read as one whole
// chunk of 16 where it lies inside h (the next row's first positions
// follow) and copied into a zeroed chunk in the frame where it does not
// (the last rows); either way the lanes past the tail are cleared after
// the conversion and their weights are −0, so nothing is folded in.
func weightedSumF16TAVX2() {
	TEXT("weightedSumF16TAVX2", 0, "func(p *float32, h *uint16, hlen int, stride int, full int, tail int, rows int, out *float32)")
	Doc("weightedSumF16TAVX2 is weightedSumF16T with AVX2: out[r] = Σ_t p[t]·h[r·stride+t] over 16·full + tail positions, h holding hlen elements.")
	Pragma("noescape")
	ptail := AllocLocal(64) // the tail's weights, −0 past it
	mask := AllocLocal(64)  // all ones in lanes < tail
	htail := AllocLocal(32) // a copied tail
	pp := Load(Param("p"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	hend := Load(Param("hlen"), GP64())
	SHLQ(U8(1), hend)
	ADDQ(h, hend)
	{
		tail := Load(Param("tail"), GP64())
		TESTQ(tail, tail)
		JZ(LabelRef("rows"))
		tv := YMM()
		VMOVQ(tail, tv.AsX())
		VPBROADCASTD(tv.AsX(), tv)
		at := Load(Param("full"), GP64())
		SHLQ(U8(6), at)
		ADDQ(pp, at)
		for half := range 2 {
			m, w, nz := YMM(), YMM(), YMM()
			VPCMPGTD(f16Iota.Offset(32*half), tv, m) // tail > lane
			VMOVDQU(m, mask.Offset(32*half))
			VMASKMOVPS(Mem{Base: at, Disp: 32 * half}, m, w)
			VANDNPS(f16NegZero, m, nz)
			VORPS(nz, w, w)
			VMOVUPS(w, ptail.Offset(32*half))
		}
	}
	Label("rows")
	block := func(R int, label string) {
		acc := make([][]reg.VecVirtual, R)
		for r := range acc {
			acc[r] = zeroY(2)
		}
		i, ap, hp := Load(Param("full"), GP64()), GP64(), GP64()
		MOVQ(pp, ap)
		MOVQ(h, hp)
		TESTQ(i, i)
		JZ(LabelRef(label + "tail"))
		Label(label + "chunk")
		pv := []reg.VecVirtual{YMM(), YMM()}
		VMOVUPS(Mem{Base: ap}, pv[0])
		VMOVUPS(Mem{Base: ap, Disp: 32}, pv[1])
		row := GP64()
		MOVQ(hp, row)
		for r := range acc {
			for p := range 2 {
				v := YMM()
				VCVTPH2PS(Mem{Base: row, Disp: 16 * p}, v)
				VFMADD231PS(pv[p], v, acc[r][p])
			}
			if r < R-1 {
				ADDQ(stride, row)
			}
		}
		ADDQ(U8(64), ap)
		ADDQ(U8(32), hp)
		DECQ(i)
		JNZ(LabelRef(label + "chunk"))

		Label(label + "tail")
		tail := Load(Param("tail"), GP64())
		TESTQ(tail, tail)
		JZ(LabelRef(label + "reduce"))
		for r := range acc {
			src, lim := GP64(), GP64()
			MOVQ(hp, src)
			LEAQ(Mem{Base: hp, Disp: 32}, lim)
			CMPQ(lim, hend)
			inside := fmt.Sprintf("%sin%d", label, r)
			JBE(LabelRef(inside))
			// Past h's end: copy the tail into the zeroed chunk.
			z := YMM()
			VXORPS(z, z, z)
			VMOVUPS(z, htail)
			c, d, e := GP64(), GP64(), GP32()
			MOVQ(tail, c)
			LEAQ(htail, d)
			copyL := fmt.Sprintf("%scopy%d", label, r)
			Label(copyL)
			MOVWLZX(Mem{Base: src}, e)
			MOVW(e.As16(), Mem{Base: d})
			ADDQ(U8(2), src)
			ADDQ(U8(2), d)
			DECQ(c)
			JNZ(LabelRef(copyL))
			LEAQ(htail, src)
			Label(inside)
			for p := range 2 {
				v := YMM()
				VCVTPH2PS(Mem{Base: src, Disp: 16 * p}, v)
				VANDPS(mask.Offset(32*p), v, v)
				VFMADD231PS(ptail.Offset(32*p), v, acc[r][p])
			}
			if r < R-1 {
				ADDQ(stride, hp)
			}
		}
		Label(label + "reduce")
		for r := range acc {
			VMOVSS(tree16(acc[r][0], acc[r][1]), Mem{Base: out, Disp: 4 * r})
		}
		ADDQ(U8(4*R), out)
		for range R {
			ADDQ(stride, h)
		}
	}
	rows := Load(Param("rows"), GP64())
	CMPQ(rows, U8(4))
	JB(LabelRef("single"))
	Label("quad")
	block(4, "q")
	rows = Load(Param("rows"), GP64())
	SUBQ(U8(4), rows)
	Store(rows, Param("rows"))
	CMPQ(rows, U8(4))
	JAE(LabelRef("quad"))
	Label("single")
	rows = Load(Param("rows"), GP64())
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	Label("one")
	block(1, "s")
	rows = Load(Param("rows"), GP64())
	DECQ(rows)
	Store(rows, Param("rows"))
	JNZ(LabelRef("one"))
	Label("done")
	VZEROUPPER()
	RET()
}

// dotsF16VecAVX2 generates dotsF16VecAVX2, dotsF16Vec with AVX2: one row
// at a time, whose four accumulators are eight YMMs.
func dotsF16VecAVX2() {
	TEXT("dotsF16VecAVX2", NOSPLIT, "func(x *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("dotsF16VecAVX2 is dotsF16Vec with AVX2.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	chunks := Load(Param("chunks"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	TESTQ(n, n)
	JZ(LabelRef("done"))
	Label("row")
	acc := make([][]reg.VecVirtual, 4)
	for j := range acc {
		acc[j] = zeroY(2)
	}
	i, xp, hp := GP64(), GP64(), GP64()
	MOVQ(chunks, i)
	MOVQ(x, xp)
	MOVQ(h, hp)
	Label("chunk")
	for j := range acc {
		for p := range 2 {
			k := YMM()
			VCVTPH2PS(Mem{Base: hp, Disp: 32*j + 16*p}, k)
			VFMADD231PS(Mem{Base: xp, Disp: 64*j + 32*p}, k, acc[j][p])
		}
	}
	ADDQ(U8(128), hp)
	ADDQ(U32(256), xp)
	DECQ(i)
	JNZ(LabelRef("chunk"))
	for p := range 2 {
		VADDPS(acc[2][p], acc[0][p], acc[0][p])
		VADDPS(acc[3][p], acc[1][p], acc[1][p])
		VADDPS(acc[1][p], acc[0][p], acc[0][p])
	}
	VMOVSS(tree16(acc[0][0], acc[0][1]), Mem{Base: out})
	ADDQ(U8(4), out)
	ADDQ(stride, h)
	DECQ(n)
	JNZ(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}

// weightedSumF16VecAVX2 generates weightedSumF16VecAVX2,
// weightedSumF16Vec with AVX2 over panels of eight outputs: the 64 lanes t
// mod 64 live in a 2 KiB frame (slot t mod 64, eight outputs wide).
func weightedSumF16VecAVX2() {
	TEXT("weightedSumF16VecAVX2", 0, "func(p *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("weightedSumF16VecAVX2 sets out (8·chunks floats) to Σ_t p[t]·row t of h (f16, stride elements apart), t < n, as weightedSumF16Vec does.")
	Pragma("noescape")
	frame := AllocLocal(64 * 32)
	pp := Load(Param("p"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	chunks := Load(Param("chunks"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	base := GP64()
	LEAQ(frame, base)
	zero := YMM()
	VXORPS(zero, zero, zero)

	Label("panel")
	for l := range 64 {
		VMOVUPS(zero, Mem{Base: base, Disp: 32 * l})
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
	SHLQ(U8(5), slot)
	v, b, m := YMM(), YMM(), YMM()
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
	// lane l = (a0+a2)+(a1+a3) of slots 16j+l; lanes l and l+8 meet at
	// once, the tree's first level.
	lane := func(l int) reg.VecVirtual {
		var a [4]reg.VecVirtual
		for j := range a {
			a[j] = YMM()
			VMOVUPS(Mem{Base: base, Disp: 32 * (16*j + l)}, a[j])
		}
		VADDPS(a[2], a[0], a[0])
		VADDPS(a[3], a[1], a[1])
		VADDPS(a[1], a[0], a[0])
		return a[0]
	}
	d := make([]reg.VecVirtual, 8)
	for l := range d {
		d[l] = lane(l)
	}
	for l := range d {
		VADDPS(lane(l+8), d[l], d[l])
	}
	for l := range 4 {
		VADDPS(d[l+4], d[l], d[l])
	}
	VADDPS(d[2], d[0], d[0])
	VADDPS(d[3], d[1], d[1])
	VADDPS(d[1], d[0], d[0])
	VMOVUPS(d[0], Mem{Base: out})
	ADDQ(U8(32), out)
	ADDQ(U8(16), h)
	DECQ(chunks)
	JNZ(LabelRef("panel"))
	VZEROUPPER()
	RET()
}
