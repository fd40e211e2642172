package main

import (
	"math"

	"github.com/mmcloughlin/avo/attr"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// AVX2 (with FMA and F16C) twins of the row helpers whose AVX-512 versions
// are in main.go and softmax.go: the same operations lane by lane, eight
// lanes a register, so the same bits. Where the AVX-512 code masks a tail
// these load it with VMASKMOVPS (which reads nothing past the lanes it
// keeps) or leave it to the Go caller.

// avx2Consts holds broadcast constants (32 bytes each) for memory operands:
// sixteen YMMs cannot hold them all beside the work.
var avx2Consts = map[string]Mem{}

func avx2Const(name string, bits uint32) Mem {
	if m, ok := avx2Consts[name]; ok {
		return m
	}
	m := GLOBL("avx2c"+name, attr.RODATA|attr.NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(bits))
	}
	avx2Consts[name] = m
	return m
}

func avx2F32(name string, f float32) Mem { return avx2Const(name, math.Float32bits(f)) }

var q8Perm Mem

// miscAVX2 emits the helpers.
func miscAVX2() {
	q8Perm = GLOBL("q8avx2perm", attr.RODATA|attr.NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
	swigluAVX2()
	softmaxF16AVX2()
	quantizeQ8_0AVX2()
	f16ConvertAVX2()
}

// expAVX2 emits ggml_v_expf of the eight lanes of x (ExpF: a Cody–Waite
// reduction by ln 2, the degree-5 polynomial j, then j·2ⁿ; |n| > 192 gives
// 0 or +Inf) and returns the result. VSCALEFPS's single rounding of j·2ⁿ
// is (j·2^(n−m))·2^m with m = ±96 where n lies outside [−126, 127], 0
// inside: the first product is exact (a normal result), the second rounds
// once, to a subnormal, 0 or +Inf as scalef would.
func expAVX2(x reg.VecVirtual) reg.VecVirtual {
	z, n, b := YMM(), YMM(), YMM()
	VMOVAPS(avx2F32("shifter", 0x1.8p23), z)
	VFMADD231PS(avx2F32("log2e", 0x1.715476p+0), x, z) // x·log2e + 1.5·2²³
	VSUBPS(avx2F32("shifter", 0x1.8p23), z, n)         // n = round(x·log2e)
	VMOVAPS(x, b)
	VFNMADD231PS(avx2F32("ln2hi", 0x1.62e4p-1), n, b)    // x − n·ln2hi
	VFNMADD231PS(avx2F32("ln2lo", 0x1.7f7d1cp-20), n, b) //   − n·ln2lo
	u, t1, t2, t3 := YMM(), YMM(), YMM(), YMM()
	VMULPS(b, b, u)
	VMOVAPS(avx2F32("c1", 0x1.573e2ep-5), t1)
	VFMADD231PS(avx2F32("c0", 0x1.0e4020p-7), b, t1) // c0·b + c1
	VMOVAPS(avx2F32("c3", 0x1.fffdb6p-2), t2)
	VFMADD231PS(avx2F32("c2", 0x1.555e66p-3), b, t2) // c2·b + c3
	VFMADD213PS(t2, u, t1)                           // t1·u + t2
	VMOVAPS(avx2F32("one", 1), t3)
	VFMADD231PS(avx2F32("c4", 0x1.ffffecp-1), b, t3) // c4·b + 1
	VFMADD213PS(t3, u, t1)                           // j = t1·u + t3
	// m = 96 where n > 127, −96 where n < −126, else 0.
	m, lt := YMM(), YMM()
	VCMPPS(U8(0x1e), avx2F32("127", 127), n, m) // n > 127 (GT_OQ)
	VANDPS(avx2F32("96", 96), m, m)
	VCMPPS(U8(0x11), avx2F32("m126", -126), n, lt) // n < −126 (LT_OQ)
	VANDPS(avx2F32("m96", -96), lt, lt)
	VORPS(lt, m, m)
	s1, s2 := YMM(), YMM()
	VSUBPS(m, n, s1) // n − m, exact
	VCVTPS2DQ(s1, s1)
	VPADDD(avx2Const("bias", 127), s1, s1)
	VPSLLD(U8(23), s1, s1) // 2^(n−m)
	VCVTPS2DQ(m, s2)
	VPADDD(avx2Const("bias", 127), s2, s2)
	VPSLLD(U8(23), s2, s2) // 2^m
	VMULPS(s1, t1, t1)
	VMULPS(s2, t1, t1)
	// |n| > 192: 0 for n ≤ 0, +Inf above (NaN compares false: j stays).
	big, pos := YMM(), YMM()
	VANDPS(avx2Const("abs", 0x7fffffff), n, big)
	VCMPPS(U8(0x1e), avx2F32("192", 192), big, big) // |n| > 192 (GT_OQ)
	VXORPS(pos, pos, pos)
	VCMPPS(U8(0x1e), pos, n, pos) // n > 0
	VANDPS(avx2F32("inf", float32(math.Inf(1))), pos, pos)
	VBLENDVPS(big, pos, t1, t1)
	return t1
}

// swigluAVX2 generates swigluAVX2, swiglu with AVX2.
func swigluAVX2() {
	TEXT("swigluAVX2", NOSPLIT, "func(dst *float32, gate *float32, up *float32, blocks int)")
	Doc("swigluAVX2 sets 16·blocks floats of dst to silu(gate)·up, as swiglu does.")
	Pragma("noescape")
	dst := Load(Param("dst"), GP64())
	gate := Load(Param("gate"), GP64())
	up := Load(Param("up"), GP64())
	n := Load(Param("blocks"), GP64())
	SHLQ(U8(1), n) // halves of 8
	Label("silu")
	x, nx := YMM(), YMM()
	VMOVUPS(Mem{Base: gate}, x)
	VXORPS(nx, nx, nx)
	VSUBPS(x, nx, nx) // −x as 0 − x
	e := expAVX2(nx)
	VADDPS(avx2F32("one", 1), e, e) // 1 + exp(−x)
	VDIVPS(e, x, x)                 // x / (1 + exp(−x))
	VMULPS(Mem{Base: up}, x, x)
	VMOVUPS(x, Mem{Base: dst})
	ADDQ(U8(32), gate)
	ADDQ(U8(32), up)
	ADDQ(U8(32), dst)
	DECQ(n)
	JNZ(LabelRef("silu"))
	VZEROUPPER()
	RET()
}

// laneMasks returns the masks of the lanes of the chunk of 16 at left
// elements from the end: lane i is all ones where i < left.
func laneMasks(left reg.GPVirtual) [2]reg.VecVirtual {
	l := YMM()
	VMOVQ(left, l.AsX())
	VPBROADCASTD(l.AsX(), l)
	var m [2]reg.VecVirtual
	for h := range m {
		m[h] = YMM()
		VPCMPGTD(f16Iota.Offset(32*h), l, m[h]) // left > i (left < 2³¹)
	}
	return m
}

// softmaxF16AVX2 generates softmaxF16AVX2, softmaxF16 with AVX2: the
// same three passes over chunks of 16 (two YMMs), the chunk sums in the
// 16-lane tree and f64.
func softmaxF16AVX2() {
	TEXT("softmaxF16AVX2", NOSPLIT, "func(s *float32, n int, scale float32)")
	Doc("softmaxF16AVX2 is softmaxF16 with AVX2.")
	Pragma("noescape")
	s := Load(Param("s"), GP64())
	n := Load(Param("n"), GP64())
	scale := YMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), scale)

	// Pass 1: scale in place, running max (lanes past n stay −Inf).
	mx := YMM()
	VMOVAPS(avx2F32("minf", float32(math.Inf(-1))), mx)
	p, left := GP64(), GP64()
	MOVQ(s, p)
	MOVQ(n, left)
	Label("scale")
	m := laneMasks(left)
	for h := range 2 {
		v := YMM()
		VMASKMOVPS(Mem{Base: p, Disp: 32 * h}, m[h], v)
		VMULPS(scale, v, v)
		VMASKMOVPS(v, m[h], Mem{Base: p, Disp: 32 * h})
		t := YMM()
		VMOVAPS(avx2F32("minf", float32(math.Inf(-1))), t)
		VBLENDVPS(m[h], v, t, t) // −Inf past n
		VMAXPS(t, mx, mx)
	}
	ADDQ(U8(64), p)
	SUBQ(U8(16), left)
	JG(LabelRef("scale"))
	hx := XMM()
	VEXTRACTF128(U8(1), mx, hx)
	VMAXPS(hx, mx.AsX(), mx.AsX())
	VMOVHLPS(mx.AsX(), mx.AsX(), hx)
	VMAXPS(hx, mx.AsX(), mx.AsX())
	VMOVSHDUP(mx.AsX(), hx)
	VMAXSS(hx, mx.AsX(), mx.AsX())
	VBROADCASTSS(mx.AsX(), mx)

	// Pass 2: e = ggml_v_expf(s − max), chunk sums into an f64.
	sum := XMM()
	VXORPD(sum, sum, sum)
	MOVQ(s, p)
	MOVQ(n, left)
	Label("exp")
	m = laneMasks(left)
	var e [2]reg.VecVirtual
	for h := range 2 {
		x := YMM()
		VMASKMOVPS(Mem{Base: p, Disp: 32 * h}, m[h], x)
		VSUBPS(mx, x, x)
		e[h] = expAVX2(x)
		VANDPS(m[h], e[h], e[h]) // lanes past n are 0 in the chunk sum
		VMASKMOVPS(e[h], m[h], Mem{Base: p, Disp: 32 * h})
	}
	r := tree16(e[0], e[1])
	d := XMM()
	VCVTSS2SD(r, d, d)
	VADDSD(d, sum, sum)
	ADDQ(U8(64), p)
	SUBQ(U8(16), left)
	JG(LabelRef("exp"))

	// Pass 3: s ← f16(e · f32(1/sum)).
	one, inv := XMM(), YMM()
	{
		g := GP64()
		MOVQ(U64(math.Float64bits(1)), g)
		MOVQ(g, one)
	}
	VDIVSD(sum, one, one)
	VCVTSD2SS(one, inv.AsX(), inv.AsX())
	VBROADCASTSS(inv.AsX(), inv)
	MOVQ(s, p)
	MOVQ(n, left)
	Label("norm")
	m = laneMasks(left)
	for h := range 2 {
		w := YMM()
		VMASKMOVPS(Mem{Base: p, Disp: 32 * h}, m[h], w)
		VMULPS(inv, w, w)
		hw := XMM()
		VCVTPS2PH(U8(0), w, hw)
		VCVTPH2PS(hw, w)
		VMASKMOVPS(w, m[h], Mem{Base: p, Disp: 32 * h})
	}
	ADDQ(U8(64), p)
	SUBQ(U8(16), left)
	JG(LabelRef("norm"))
	VZEROUPPER()
	RET()
}

// quantizeQ8_0AVX2 generates quantizeQ8_0AVX2, quantizeQ8_0 with AVX2:
// the int32 quants are packed to bytes with VPACKSSDW, VPACKSSWB (|q| ≤
// 127 never saturates) and VPERMD back into element order.
func quantizeQ8_0AVX2() {
	TEXT("quantizeQ8_0AVX2", NOSPLIT, "func(x *float32, blocks int, dst *byte)")
	Doc("quantizeQ8_0AVX2 is quantizeQ8_0 with AVX2.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	blocks := Load(Param("blocks"), GP64())
	dst := Load(Param("dst"), GP64())
	c := GP32()
	MOVL(U32(0x42fe0000), c) // 127.0
	c127 := XMM()
	VMOVD(c, c127)
	zero := XMM()
	VXORPS(zero, zero, zero)
	perm := YMM()
	VMOVDQU(q8Perm, perm)

	Label("qblock")
	v := make([]reg.VecVirtual, 4)
	for i := range v {
		v[i] = YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * i}, v[i])
	}
	a, t := YMM(), YMM()
	VANDPS(avx2Const("abs", 0x7fffffff), v[0], a)
	for i := 1; i < 4; i++ {
		VANDPS(avx2Const("abs", 0x7fffffff), v[i], t)
		VMAXPS(t, a, a)
	}
	hx := XMM()
	VEXTRACTF128(U8(1), a, hx)
	VMAXPS(hx, a.AsX(), a.AsX())
	VMOVHLPS(a.AsX(), a.AsX(), hx)
	VMAXPS(hx, a.AsX(), a.AsX())
	VMOVSHDUP(a.AsX(), hx)
	VMAXSS(hx, a.AsX(), a.AsX()) // amax
	d, h := XMM(), XMM()
	VDIVSS(c127, a.AsX(), d) // d = amax/127
	VCVTPS2PH(U8(0), d, h)
	VPEXTRW(U8(0), h, Mem{Base: dst})
	id := YMM()
	VXORPS(id, id, id)
	VUCOMISS(zero, a.AsX())
	JE(LabelRef("scaled"))          // amax = 0: id = 0
	VDIVSS(a.AsX(), c127, id.AsX()) // id = 127/amax
	Label("scaled")
	VBROADCASTSS(id.AsX(), id)
	for i := range v {
		VMULPS(id, v[i], v[i])
		VCVTPS2DQ(v[i], v[i])
	}
	VPACKSSDW(v[1], v[0], v[0])
	VPACKSSDW(v[3], v[2], v[2])
	VPACKSSWB(v[2], v[0], v[0])
	VPERMD(v[0], perm, v[0])
	VMOVDQU(v[0], Mem{Base: dst, Disp: 2})
	ADDQ(U8(128), x)
	ADDQ(U8(34), dst)
	DECQ(blocks)
	JNZ(LabelRef("qblock"))
	VZEROUPPER()
	RET()
}

// f16ConvertAVX2 generates f32ToF16sAVX2 and roundF16sAVX2, f32ToF16s and
// roundF16s with F16C over 8·chunks floats (the caller converts the rest).
func f16ConvertAVX2() {
	for _, back := range []bool{false, true} {
		name, sig, doc := "f32ToF16sAVX2", "func(src *float32, chunks int, dst *uint16)", "f32ToF16sAVX2 converts 8·chunks floats at src to f16 bits at dst."
		if back {
			name, sig, doc = "roundF16sAVX2", "func(src *float32, chunks int, dst *float32)", "roundF16sAVX2 rounds 8·chunks floats at src to f16 precision into dst."
		}
		TEXT(name, NOSPLIT, sig)
		Doc(doc)
		Pragma("noescape")
		src := Load(Param("src"), GP64())
		n := Load(Param("chunks"), GP64())
		dst := Load(Param("dst"), GP64())
		Label(name + "chunk")
		v, h := YMM(), XMM()
		VMOVUPS(Mem{Base: src}, v)
		VCVTPS2PH(U8(0), v, h)
		if back {
			VCVTPH2PS(h, v)
			VMOVUPS(v, Mem{Base: dst})
			ADDQ(U8(32), dst)
		} else {
			VMOVDQU(h, Mem{Base: dst})
			ADDQ(U8(16), dst)
		}
		ADDQ(U8(32), src)
		DECQ(n)
		JNZ(LabelRef(name + "chunk"))
		VZEROUPPER()
		RET()
	}
}
