package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// broadcastF32 emits a register holding f in all 16 lanes.
func broadcastF32(f float32) reg.VecVirtual {
	r := GP32()
	MOVL(U32(math.Float32bits(f)), r)
	z := ZMM()
	VPBROADCASTD(r, z)
	return z
}

// lanesMask emits k = the low min(left, 16) bits set: the lanes of the
// current chunk of 16 that lie inside the row.
func lanesMask(left reg.GPVirtual, ones reg.GPVirtual) reg.OpmaskVirtual {
	n, sixteen := GP64(), GP64()
	MOVQ(left, n)
	MOVQ(U32(16), sixteen)
	CMPQ(n, sixteen)
	CMOVQGT(sixteen, n)
	m := GP32()
	BZHIL(n.As32(), ones, m)
	k := K()
	KMOVW(m, k)
	return k
}

// softmaxF16 generates softmaxF16, the attention softmax of one query's
// scores exactly as infer/cpu computes it lane by lane (llama.cpp's x86
// soft_max with f16 weights): s ← s·scale; m = max s; e = ggml_v_expf(s −
// m); sum = Σ over chunks of 16 (f64) of the chunk's _mm512_reduce_add_ps
// order sum (lanes past n count 0); s ← f16(e · f32(1/sum)). Same
// instructions as ggml's AVX-512 build: FMAs, VSCALEFPS, VCVTPS2PH with
// round-to-nearest-even.
func softmaxF16() {
	TEXT("softmaxF16", NOSPLIT, "func(s *float32, n int, scale float32)")
	Doc("softmaxF16 replaces the n scores at s by their f16-rounded softmax after scaling them by scale.")
	Pragma("noescape")
	s := Load(Param("s"), GP64())
	n := Load(Param("n"), GP64())
	scale := ZMM()
	VBROADCASTSS(Load(Param("scale"), XMM()), scale)
	ones := GP32()
	MOVL(U32(0xffff), ones)

	// Pass 1: scale in place, running max.
	mx := broadcastF32(float32(math.Inf(-1)))
	p, left := GP64(), GP64()
	MOVQ(s, p)
	MOVQ(n, left)
	Label("scale")
	k := lanesMask(left, ones)
	v := ZMM()
	VMOVUPS_Z(Mem{Base: p}, k, v)
	VMULPS(scale, v, v)
	VMOVUPS(v, k, Mem{Base: p})
	VMAXPS(v, mx, k, mx)
	ADDQ(U8(64), p)
	SUBQ(U8(16), left)
	JG(LabelRef("scale"))
	hi := YMM()
	VEXTRACTF64X4(U8(1), mx, hi)
	VMAXPS(hi, mx.AsY(), mx.AsY())
	hx := XMM()
	VEXTRACTF32X4(U8(1), mx.AsY(), hx)
	VMAXPS(hx, mx.AsX(), mx.AsX())
	VMOVHLPS(mx.AsX(), mx.AsX(), hx)
	VMAXPS(hx, mx.AsX(), mx.AsX())
	VMOVSHDUP(mx.AsX(), hx)
	VMAXSS(hx, mx.AsX(), mx.AsX())
	VBROADCASTSS(mx.AsX(), mx)

	// Pass 2: e = ggml_v_expf(s − max), chunk sums into an f64.
	shifter := broadcastF32(0x1.8p23)
	log2e := broadcastF32(0x1.715476p+0)
	ln2hi := broadcastF32(0x1.62e4p-1)
	ln2lo := broadcastF32(0x1.7f7d1cp-20)
	c192 := broadcastF32(192)
	inf := broadcastF32(float32(math.Inf(1)))
	absMask := ZMM()
	{
		r := GP32()
		MOVL(U32(0x7fffffff), r)
		VPBROADCASTD(r, absMask)
	}
	poly := []float32{0x1.0e4020p-7, 0x1.573e2ep-5, 0x1.555e66p-3, 0x1.fffdb6p-2, 0x1.ffffecp-1, 1}
	c := make([]reg.VecVirtual, len(poly))
	for i, f := range poly {
		c[i] = broadcastF32(f)
	}
	zero := ZMM()
	VPXORD(zero, zero, zero)
	sum := XMM()
	VXORPD(sum, sum, sum)
	MOVQ(s, p)
	MOVQ(n, left)
	Label("exp")
	k = lanesMask(left, ones)
	x := ZMM()
	VMOVUPS_Z(Mem{Base: p}, k, x)
	VSUBPS(mx, x, x)
	z := ZMM()
	VMOVAPS(shifter, z)
	VFMADD231PS(log2e, x, z) // z = x·log2e + shifter
	nn := ZMM()
	VSUBPS(shifter, z, nn) // n
	b := ZMM()
	VMOVAPS(x, b)
	VFNMADD231PS(ln2hi, nn, b) // x − n·ln2hi
	VFNMADD231PS(ln2lo, nn, b) // … − n·ln2lo
	u := ZMM()
	VMULPS(b, b, u)
	t1, t2, t3 := ZMM(), ZMM(), ZMM()
	VMOVAPS(c[1], t1)
	VFMADD231PS(c[0], b, t1) // c0·b + c1
	VMOVAPS(c[3], t2)
	VFMADD231PS(c[2], b, t2) // c2·b + c3
	VFMADD213PS(t2, u, t1)   // t1·u + t2
	VMOVAPS(c[5], t3)
	VFMADD231PS(c[4], b, t3) // c4·b + 1
	VFMADD213PS(t3, u, t1)   // j = t1·u + t3
	e := ZMM()
	VSCALEFPS(nn, t1, e)
	// |n| > 192: 0 below, +inf above (ggml's blend).
	an := ZMM()
	VANDPS(absMask, nn, an)
	big, neg := K(), K()
	VCMPPS(U8(0x1e), c192, an, big) // |n| > 192, ordered
	VCMPPS(U8(0x12), zero, nn, neg) // n ≤ 0, ordered
	alt := ZMM()
	VMOVAPS(inf, alt)
	VMOVAPS(zero, neg, alt)
	VMOVAPS(alt, big, e)
	VMOVAPS_Z(e, k, e) // lanes past n are 0 in the chunk sum
	VMOVUPS(e, k, Mem{Base: p})
	reduce16(e)
	d := XMM()
	VCVTSS2SD(e.AsX(), d, d)
	VADDSD(d, sum, sum)
	ADDQ(U8(64), p)
	SUBQ(U8(16), left)
	JG(LabelRef("exp"))

	// Pass 3: s ← f16(e · f32(1/sum)).
	one, inv := XMM(), ZMM()
	{
		r := GP64()
		MOVQ(U64(math.Float64bits(1)), r)
		MOVQ(r, one)
	}
	VDIVSD(sum, one, one)
	VCVTSD2SS(one, inv.AsX(), inv.AsX())
	VBROADCASTSS(inv.AsX(), inv)
	MOVQ(s, p)
	MOVQ(n, left)
	Label("norm")
	k = lanesMask(left, ones)
	w := ZMM()
	VMOVUPS_Z(Mem{Base: p}, k, w)
	VMULPS(inv, w, w)
	h := YMM()
	VCVTPS2PH(U8(0), w, h)
	VCVTPH2PS(h, w)
	VMOVUPS(w, k, Mem{Base: p})
	ADDQ(U8(64), p)
	SUBQ(U8(16), left)
	JG(LabelRef("norm"))
	VZEROUPPER()
	RET()
}

// f16Convert generates f32ToF16s (f32 → f16 bits) and roundF16s (f32 →
// nearest f16 → f32), VCVTPS2PH with round-to-nearest-even as ggml's
// F16C conversions; a masked last chunk covers n not a multiple of 16.
func f16Convert() {
	for _, back := range []bool{false, true} {
		name, sig, doc := "f32ToF16s", "func(src *float32, n int, dst *uint16)", "f32ToF16s converts n floats at src to f16 bits at dst."
		if back {
			name, sig, doc = "roundF16s", "func(src *float32, n int, dst *float32)", "roundF16s rounds n floats at src to f16 precision into dst."
		}
		TEXT(name, NOSPLIT, sig)
		Doc(doc)
		Pragma("noescape")
		src := Load(Param("src"), GP64())
		left := GP64()
		Load(Param("n"), left)
		dst := Load(Param("dst"), GP64())
		ones := GP32()
		MOVL(U32(0xffff), ones)
		Label(name + "chunk")
		k := lanesMask(left, ones)
		v := ZMM()
		VMOVUPS_Z(Mem{Base: src}, k, v)
		h := YMM()
		VCVTPS2PH(U8(0), v, h)
		if back {
			VCVTPH2PS(h, v)
			VMOVUPS(v, k, Mem{Base: dst})
			ADDQ(U8(64), dst)
		} else {
			VMOVDQU16(h, k, Mem{Base: dst})
			ADDQ(U8(32), dst)
		}
		ADDQ(U8(64), src)
		SUBQ(U8(16), left)
		JG(LabelRef(name + "chunk"))
		VZEROUPPER()
		RET()
	}
}
