// Command asm generates infer/quant's AVX-512 VNNI kernels with avo. Run
// from infer/quant (see the go:generate line in simd_amd64.go):
//
//	cd asm && go run . -out ../simd_amd64.s -stubs ../simd_stub_amd64.go -pkg quant
//
// It is its own module so that avo's dependencies stay out of bonsai's
// go.mod.
//
// The kernels read weights repacked at load into groups of 16 rows
// (infer/quant/repack.go): one 512-bit register holds the same four columns
// of 16 rows as unsigned bytes u, so VPDPBUSD yields one partial sum per row,
// and the per-block float scaling costs one multiply-add per 16 rows instead
// of one per row. The activations of a tile of up to 8 tokens are
// interleaved per 4-byte group, so each VPDPBUSD broadcasts one token's
// group from memory, and one u register serves every token of the tile.
//
// For every type, the weight value is u − c for a constant c, so
//
//	Σ value·q = Σ u·q − c·Σq,
//
// and the accumulator starts at −c·Σq (from the activations' −Σq plane):
// the integer sum per 32-column sub-block is exact, as in llama.cpp.
//
//	Q2_0: u = code ∈ {0..3}, value code − 1,  c = 1 (PQ2_0 too)
//	PTQ1_0: u = trit ∈ {0, 1, 2}, value trit − 1, c = 1
//	Q4_0: u = code ∈ {0..15}, value code − 8, c = 8
//	Q8_0: u = q + 128,        value q,        c = 128
package main

import (
	"fmt"
	"os"

	"github.com/mmcloughlin/avo/attr"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// spec describes one weight type's packed layout and how to expand it.
type spec struct {
	name       string
	cols       int // columns per packed block (the weight scale's span)
	blockBytes int // packed bytes per 16 rows × cols
	scales     int // offset of the 16 f16 row scales in the block
	shift      int // c = 1 << shift
	// setup emits the constants the expansion needs.
	setup func() []reg.VecVirtual
	// u emits the expansion of group g (4 columns × 16 rows) of the block
	// at w and returns the register holding it.
	u func(w reg.Register, consts []reg.VecVirtual, g int, cache map[int]reg.VecVirtual) reg.VecVirtual
	// few, if set, generates the kernels for 1 and 2 tokens instead.
	few func(s spec, T int)
}

func broadcastByte(v uint32) reg.VecVirtual {
	r := GP32()
	MOVL(U32(v*0x01010101), r)
	z := ZMM()
	VPBROADCASTD(r, z)
	return z
}

var specs = []spec{
	q2Spec("q2_0", 64),
	q2Spec("q2_0g128", 128), // and PQ2_0
	ptq1_0Spec,
	{
		// 4 × 64 bytes: byte 4r+e of chunk p holds row r's codes of column
		// 8p+e (low nibble) and 8p+4+e (high nibble); 16 f16.
		name: "q4_0", cols: 32, blockBytes: 288, scales: 256, shift: 3,
		setup: func() []reg.VecVirtual { return []reg.VecVirtual{broadcastByte(0x0f)} },
		u: func(w reg.Register, c []reg.VecVirtual, g int, cache map[int]reg.VecVirtual) reg.VecVirtual {
			if u, ok := cache[g]; ok {
				return u
			}
			v, lo, hi := ZMM(), ZMM(), ZMM()
			VMOVDQU64(Mem{Base: w, Disp: 64 * (g / 2)}, v)
			VPANDD(c[0], v, lo)
			VPSRLW(U8(4), v, hi)
			VPANDD(c[0], hi, hi)
			cache[g&^1], cache[g|1] = lo, hi
			return cache[g]
		},
	},
	{
		// 8 × 64 bytes: byte 4r+e of chunk g = row r, column 4g+e, plus 128;
		// 16 f16.
		name: "q8_0", cols: 32, blockBytes: 544, scales: 512, shift: 7,
		setup: func() []reg.VecVirtual { return nil },
		u: func(w reg.Register, _ []reg.VecVirtual, g int, _ map[int]reg.VecVirtual) reg.VecVirtual {
			u := ZMM()
			VMOVDQU64(Mem{Base: w, Disp: 64 * g}, u)
			return u
		},
	},
}

// q2Spec: 64-byte chunks of 16 columns, group 4p+j in bits 2j of chunk p's
// bytes (repack.go's q2Layout); u = (chunk >> 2j) & 3.
func q2Spec(name string, cols int) spec {
	return spec{
		name: name, cols: cols, blockBytes: 4*cols + 32, scales: 4 * cols, shift: 0,
		setup: func() []reg.VecVirtual { return []reg.VecVirtual{broadcastByte(3)} },
		u: func(w reg.Register, c []reg.VecVirtual, g int, cache map[int]reg.VecVirtual) reg.VecVirtual {
			p, j := g/4, g%4
			v, ok := cache[-1-p]
			if !ok {
				v = ZMM()
				VMOVDQU64(Mem{Base: w, Disp: 64 * p}, v)
				cache[-1-p] = v
			}
			u := ZMM()
			if j == 0 {
				VPANDD(c[0], v, u)
				return u
			}
			VPSRLW(U8(2*j), v, u)
			VPANDD(c[0], u, u)
			return u
		},
	}
}

// prefetchBlocks is how far ahead (in packed blocks) the kernels prefetch
// weights.
const prefetchBlocks = 16

func main() {
	switch os.Getenv("BONSAI_ASM_SET") {
	case "kquants":
		kquantsMain()
		return
	case "q1_0":
		q1_0Main()
		return
	case "legacy":
		legacyMain()
		return
	}
	for _, s := range specs {
		for _, t := range []int{1, 2, 4, 8} {
			if s.few != nil && t <= 2 {
				s.few(s, t)
				continue
			}
			kernel(s, t)
		}
	}
	dotsF16()
	weightedSumF16()
	weightedSumF16T()
	firstAbove("firstGT", 0x11, "x[i] > thr (NaN never)")
	firstAbove("firstNLE", 0x19, "!(x[i] ≤ thr) (NaN always)")
	dotsF16Vec()
	weightedSumF16Vec()
	f16AVX2Kernels()
	miscAVX2()
	quantizeQ8_0()
	swiglu()
	softmaxF16()
	f16Convert()
	avx2Data()
	avx2QuantKernels()
	prismAVX2Kernels()
	floatKernels()
	Generate()
}

// vpdpbusdBcst emits VPDPBUSD.BCST m32, u, acc: acc += Σ₄ u(u8)·m(s8) per
// lane, m one broadcast dword. avo v0.5.0's instruction table predates
// AVX512_VNNI, so the instruction is spelled out for its register
// allocator.
func vpdpbusdBcst(m Mem, u, acc reg.VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Suffixes: []string{"BCST"},
		Operands: []Op{m, u, acc},
		Inputs:   []Op{m, u, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI"},
	})
}

// kernel generates <name>x16t<T>: 16 rows × T tokens. Per 32-column
// sub-block k of a block:
//
//	s[r] = −c·Σq_k + Σ_{g<8} Σ_{e<4} u[r][4g+e]·q[4g+e]   (exact)
//
// Blocks of one sub-block (Q4_0, Q8_0) then do acc[r] += float(s[r]) ·
// (d_w[r]·d_x), llama.cpp's sumi·(d_w·d_x); wider blocks (Q2_0) do
// blk[r] += d_x[k]·float(s[r]) over the sub-blocks, then acc[r] += d_w[r] ·
// blk[r], as ggml's Q2_0 dot product does. (Q1_0 has its own kernels:
// q1_0.go.)
func kernel(s spec, T int) {
	name := fmt.Sprintf("%sx16t%d", s.name, T)
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a %s · Q8_0 product.", name, T, s.name))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	negq := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	consts := s.setup()

	subs := s.cols / 32
	acc := make([]reg.VecVirtual, T)
	blk := make([]reg.VecVirtual, T)
	sum := make([]reg.VecVirtual, T)
	for t := range acc {
		acc[t], blk[t], sum[t] = ZMM(), ZMM(), ZMM()
		VPXORD(acc[t], acc[t], acc[t])
	}

	Label("block")
	// Software prefetch a few blocks ahead: the hardware streamers stop at
	// 4 KiB page boundaries, which a matrix-vector product crosses every
	// 14 blocks while it streams hundreds of MB. Into L2, not L1: on Zen 4
	// one thread read Q8_0 from memory at 14.4 GB/s with PREFETCHT0, 17.6
	// with PREFETCHT2 (Q4_0 11.6 → 12.8; BenchmarkKernel 151936×2048).
	for off := 0; off < s.blockBytes; off += 64 {
		PREFETCHT2(Mem{Base: w, Disp: prefetchBlocks*s.blockBytes + off})
	}
	cache := map[int]reg.VecVirtual{}
	for k := 0; k < subs; k++ {
		for t := 0; t < T; t++ {
			VPBROADCASTD(Mem{Base: negq, Disp: 32*k + 4*t}, sum[t])
			if s.shift > 0 {
				VPSLLD(U8(s.shift), sum[t], sum[t])
			}
		}
		for g := 0; g < 8; g++ {
			u := s.u(w, consts, 8*k+g, cache)
			for t := 0; t < T; t++ {
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*(8*k+g) + 4*t}, u, sum[t])
			}
		}
		for t := 0; t < T; t++ {
			VCVTDQ2PS(sum[t], sum[t])
		}
		if subs == 1 {
			dw := ZMM()
			VCVTPH2PS(Mem{Base: w, Disp: s.scales}, dw)
			for t := 0; t < T; t++ {
				VMULPS_BCST(Mem{Base: dk, Disp: 4 * t}, dw, blk[t])
				VFMADD231PS(sum[t], blk[t], acc[t])
			}
			continue
		}
		for t := 0; t < T; t++ {
			if k == 0 {
				VMULPS_BCST(Mem{Base: dk, Disp: 32*k + 4*t}, sum[t], blk[t])
			} else {
				VFMADD231PS_BCST(Mem{Base: dk, Disp: 32*k + 4*t}, sum[t], blk[t])
			}
		}
	}
	if subs > 1 {
		dw := ZMM()
		VCVTPH2PS(Mem{Base: w, Disp: s.scales}, dw)
		for t := 0; t < T; t++ {
			VFMADD231PS(blk[t], dw, acc[t])
		}
	}
	ADDQ(U32(s.blockBytes), w)
	ADDQ(U32(8*s.cols), qs)  // cols/4 groups × 8 tokens × 4 bytes
	ADDQ(U32(32*subs), negq) // per sub-block: 8 tokens × 4 bytes
	ADDQ(U32(32*subs), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	storeRows(acc)
}

// storeRows stores token t's 16 row results acc[t] at y + t·ldy and
// returns. Only the rows in rowMask are stored: the last group of a matrix
// may be partial.
func storeRows(acc []reg.VecVirtual) {
	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	mask := Load(Param("rowMask"), GP32())
	kstore := K()
	KMOVW(mask, kstore)
	for t := 0; t < len(acc); t++ {
		VMOVUPS(acc[t], kstore, Mem{Base: y})
		if t+1 < len(acc) {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// reduce16 emits the horizontal sum of z's 16 lanes in the order of
// _mm512_reduce_add_ps (halves, then quarters, then (0+2)+(1+3)) into the
// low float of z.
func reduce16(z reg.VecVirtual) {
	hi := YMM()
	VEXTRACTF64X4(U8(1), z, hi)
	lo := z.AsY()
	VADDPS(hi, lo, lo)
	hx := XMM()
	VEXTRACTF32X4(U8(1), lo, hx) // EVEX: the allocator may pick Y16–Y31
	lx := z.AsX()
	VADDPS(hx, lx, lx)
	VMOVHLPS(lx, lx, hx)
	VADDPS(hx, lx, lx)
	VMOVSHDUP(lx, hx)
	VADDSS(hx, lx, lx)
}

// dotsF16 generates dotsF16: out[t] = Σ_d x[d]·f16(h[t·stride + d]) for t <
// n, d < 16·chunks, the way tinyBLAS's f16 dot runs on AVX-512 (llama.cpp's
// attention scores without flash attention): one 16-lane accumulator of
// fused multiply-adds (lane d mod 16, d ascending), then reduce16.
func dotsF16() {
	TEXT("dotsF16", NOSPLIT, "func(x *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("dotsF16 computes n dot products of x (16·chunks floats) with f16 rows of h, stride elements apart.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	chunks := Load(Param("chunks"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride) // bytes
	// Four rows at a time: each row keeps its own single chain of FMAs
	// (the order above), but four chains hide the FMA latency.
	CMPQ(n, U8(4))
	JB(LabelRef("single"))
	Label("quad")
	{
		acc := []reg.VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
		for _, a := range acc {
			VPXORD(a, a, a)
		}
		i, xp, hp := GP64(), GP64(), GP64()
		MOVQ(chunks, i)
		MOVQ(x, xp)
		MOVQ(h, hp)
		Label("quadchunk")
		xv := ZMM()
		VMOVUPS(Mem{Base: xp}, xv)
		row := GP64()
		MOVQ(hp, row)
		for r, a := range acc {
			k := ZMM()
			VCVTPH2PS(Mem{Base: row}, k)
			VFMADD231PS(xv, k, a)
			if r < 3 {
				ADDQ(stride, row)
			}
		}
		ADDQ(U8(32), hp)
		ADDQ(U8(64), xp)
		DECQ(i)
		JNZ(LabelRef("quadchunk"))
		for r, a := range acc {
			reduce16(a)
			VMOVSS(a.AsX(), Mem{Base: out, Disp: 4 * r})
		}
		ADDQ(U8(16), out)
		for r := 0; r < 4; r++ {
			ADDQ(stride, h)
		}
		SUBQ(U8(4), n)
		CMPQ(n, U8(4))
		JAE(LabelRef("quad"))
	}
	Label("single")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	Label("row")
	acc := ZMM()
	VPXORD(acc, acc, acc)
	i, xp, hp := GP64(), GP64(), GP64()
	MOVQ(chunks, i)
	MOVQ(x, xp)
	MOVQ(h, hp)
	Label("chunk")
	k := ZMM()
	VCVTPH2PS(Mem{Base: hp}, k)
	VFMADD231PS(Mem{Base: xp}, k, acc)
	ADDQ(U8(32), hp)
	ADDQ(U8(64), xp)
	DECQ(i)
	JNZ(LabelRef("chunk"))
	reduce16(acc)
	VMOVSS(acc.AsX(), Mem{Base: out})
	ADDQ(U8(4), out)
	ADDQ(stride, h)
	DECQ(n)
	JNZ(LabelRef("row"))
	Label("done")
	VZEROUPPER()
	RET()
}

// weightedSumF16 generates weightedSumF16: out[d] = Σ_t p[t]·f16(h[t·stride
// + d]) for t < n, d < 16·chunks, as tinyBLAS computes llama.cpp's
// probabilities · Vᵀ: per output, 16 lanes of fused multiply-adds (lane t
// mod 16, t ascending), then reduce16. Sixteen outputs at a time: register
// acc[l] holds lane l of each, so the final tree is vertical adds.
func weightedSumF16() {
	TEXT("weightedSumF16", NOSPLIT, "func(p *float32, h *uint16, stride int, n int, chunks int, out *float32)")
	Doc("weightedSumF16 sets out (16·chunks floats) to Σ_t p[t]·row t of h (f16, stride elements apart), t < n.")
	Pragma("noescape")
	pp := Load(Param("p"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	n := Load(Param("n"), GP64())
	chunks := Load(Param("chunks"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	stride16 := GP64()
	MOVQ(stride, stride16)
	SHLQ(U8(4), stride16)

	Label("panel")
	acc := make([]reg.VecVirtual, 16)
	for l := range acc {
		acc[l] = ZMM()
		VPXORD(acc[l], acc[l], acc[l])
	}
	t, ap, hp, row := GP64(), GP64(), GP64(), GP64()
	MOVQ(n, t)
	MOVQ(pp, ap)
	MOVQ(h, hp)
	// Whole groups of 16 rows: row l of the group feeds lane l.
	CMPQ(t, U8(16))
	JB(LabelRef("tail"))
	Label("group")
	MOVQ(hp, row)
	for l := range acc {
		v, b := ZMM(), ZMM()
		VCVTPH2PS(Mem{Base: row}, v)
		VBROADCASTSS(Mem{Base: ap, Disp: 4 * l}, b)
		VFMADD231PS(v, b, acc[l])
		if l < 15 {
			ADDQ(stride, row)
		}
	}
	ADDQ(U8(64), ap)
	ADDQ(stride16, hp)
	SUBQ(U8(16), t)
	CMPQ(t, U8(16))
	JAE(LabelRef("group"))
	// The last t < 16 rows feed lanes 0 … t−1.
	Label("tail")
	for l := 0; l < 15; l++ {
		TESTQ(t, t)
		JZ(LabelRef("reduce"))
		v, b := ZMM(), ZMM()
		VCVTPH2PS(Mem{Base: hp}, v)
		VBROADCASTSS(Mem{Base: ap, Disp: 4 * l}, b)
		VFMADD231PS(v, b, acc[l])
		ADDQ(stride, hp)
		DECQ(t)
	}
	Label("reduce")
	for l := 0; l < 8; l++ {
		VADDPS(acc[l+8], acc[l], acc[l])
	}
	for l := 0; l < 4; l++ {
		VADDPS(acc[l+4], acc[l], acc[l])
	}
	VADDPS(acc[2], acc[0], acc[0])
	VADDPS(acc[3], acc[1], acc[1])
	VADDPS(acc[1], acc[0], acc[0])
	VMOVUPS(acc[0], Mem{Base: out})
	ADDQ(U8(64), out)
	ADDQ(U8(32), h)
	DECQ(chunks)
	JNZ(LabelRef("panel"))
	VZEROUPPER()
	RET()
}

// weightedSumF16T generates weightedSumF16T, weightedSumF16 over V stored
// transposed (row d holds dimension d at every position): out[d] = Σ_t
// p[t]·f16(h[d·stride + t]) with the same 16 lanes (lane t mod 16, t
// ascending) and reduce16, so the same bits, but each output is a dot
// product over contiguous f16 instead of a walk down a column. Four
// outputs share each chunk of p; the last n mod 16 positions (tail, a mask
// of them) go through merge-masked loads and multiply-adds, which leave the
// other lanes as they were and read nothing past the row.
func weightedSumF16T() {
	TEXT("weightedSumF16T", NOSPLIT, "func(p *float32, h *uint16, stride int, full int, tail uint16, rows int, out *float32)")
	Doc("weightedSumF16T sets out[r] = Σ_t p[t]·h[r·stride+t] (f16) for rows r, over 16·full positions and the tail mask's.")
	Pragma("noescape")
	pp := Load(Param("p"), GP64())
	h := Load(Param("h"), GP64())
	stride := Load(Param("stride"), GP64())
	full := Load(Param("full"), GP64())
	tm := Load(Param("tail"), GP32())
	rows := Load(Param("rows"), GP64())
	out := Load(Param("out"), GP64())
	SHLQ(U8(1), stride)
	tail := K()
	KMOVW(tm, tail)
	quad := func(R int, label string) {
		acc := make([]reg.VecVirtual, R)
		for r := range acc {
			acc[r] = ZMM()
			VPXORD(acc[r], acc[r], acc[r])
		}
		i, ap, hp, row := GP64(), GP64(), GP64(), GP64()
		MOVQ(full, i)
		MOVQ(pp, ap)
		MOVQ(h, hp)
		TESTQ(i, i)
		JZ(LabelRef(label + "tail"))
		Label(label + "chunk")
		pv := ZMM()
		VMOVUPS(Mem{Base: ap}, pv)
		MOVQ(hp, row)
		for r := range acc {
			v := ZMM()
			VCVTPH2PS(Mem{Base: row}, v)
			VFMADD231PS(pv, v, acc[r])
			if r < R-1 {
				ADDQ(stride, row)
			}
		}
		ADDQ(U8(64), ap)
		ADDQ(U8(32), hp)
		DECQ(i)
		JNZ(LabelRef(label + "chunk"))
		Label(label + "tail")
		TESTL(tm, tm)
		JZ(LabelRef(label + "reduce"))
		pt := ZMM()
		VPXORD(pt, pt, pt)
		VMOVUPS(Mem{Base: ap}, tail, pt)
		MOVQ(hp, row)
		for r := range acc {
			v := ZMM()
			VPXORD(v, v, v)
			VCVTPH2PS(Mem{Base: row}, tail, v)
			VFMADD231PS(pt, v, tail, acc[r])
			if r < R-1 {
				ADDQ(stride, row)
			}
		}
		Label(label + "reduce")
		for r := range acc {
			reduce16(acc[r])
			VMOVSS(acc[r].AsX(), Mem{Base: out, Disp: 4 * r})
		}
		ADDQ(U8(4*R), out)
		for range R {
			ADDQ(stride, h)
		}
	}
	CMPQ(rows, U8(4))
	JB(LabelRef("single"))
	Label("quad")
	quad(4, "q")
	SUBQ(U8(4), rows)
	CMPQ(rows, U8(4))
	JAE(LabelRef("quad"))
	Label("single")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	Label("one")
	quad(1, "s")
	DECQ(rows)
	JNZ(LabelRef("one"))
	Label("done")
	VZEROUPPER()
	RET()
}

// firstAbove generates name: the index of the first of 16·blocks floats at
// x for which pred(thr, x[i]) holds (VCMPPS predicate imm, thr as the first
// operand), or 16·blocks. Sixteen comparisons per instruction make the
// samplers' scans for a logit above the current cut a pass at memory speed.
func firstAbove(name string, imm uint8, what string) {
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, thr float32) int")
	Doc(name + " is the index of the first of 16·blocks floats at x with " + what + ", or 16·blocks.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	blocks := Load(Param("blocks"), GP64())
	t := ZMM()
	VBROADCASTSS(Load(Param("thr"), XMM()), t)
	i := GP64()
	XORQ(i, i)
	k := K()
	r := GP32()
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "none"))
	Label(name + "loop")
	VCMPPS(U8(imm), Mem{Base: x}, t, k)
	KORTESTW(k, k)
	JNZ(LabelRef(name + "hit"))
	ADDQ(U8(64), x)
	ADDQ(U8(16), i)
	DECQ(blocks)
	JNZ(LabelRef(name + "loop"))
	Label(name + "none")
	Store(i, ReturnIndex(0))
	VZEROUPPER()
	RET()
	Label(name + "hit")
	KMOVW(k, r)
	TZCNTL(r, r)
	ADDQ(r.As64(), i)
	Store(i, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// quantizeQ8_0 generates quantizeQ8_0: blocks of 32 floats to Q8_0 exactly
// as ggml-cpu's AVX quantize_row_q8_0: amax over the block, d = amax/127
// stored as f16, q = round-half-even(x · (127/amax)) (VCVTPS2DQ under the
// default MXCSR rounding), 0 for an all-zero block.
func quantizeQ8_0() {
	TEXT("quantizeQ8_0", NOSPLIT, "func(x *float32, blocks int, dst *byte)")
	Doc("quantizeQ8_0 quantizes blocks×32 floats at x into Q8_0 blocks at dst.")
	Pragma("noescape")
	x := Load(Param("x"), GP64())
	blocks := Load(Param("blocks"), GP64())
	dst := Load(Param("dst"), GP64())
	c := GP32()
	MOVL(U32(0x7fffffff), c)
	absMask := ZMM()
	VPBROADCASTD(c, absMask)
	MOVL(U32(0x42fe0000), c) // 127.0
	c127 := XMM()
	VMOVD(c, c127)
	zero := XMM()
	VXORPS(zero, zero, zero)

	Label("qblock")
	v0, v1, m := ZMM(), ZMM(), ZMM()
	VMOVUPS(Mem{Base: x}, v0)
	VMOVUPS(Mem{Base: x, Disp: 64}, v1)
	VANDPS(absMask, v0, m)
	t := ZMM()
	VANDPS(absMask, v1, t)
	VMAXPS(t, m, m)
	hi := YMM()
	VEXTRACTF64X4(U8(1), m, hi)
	VMAXPS(hi, m.AsY(), m.AsY())
	hx := XMM()
	VEXTRACTF128(U8(1), m.AsY(), hx)
	VMAXPS(hx, m.AsX(), m.AsX())
	VMOVHLPS(m.AsX(), m.AsX(), hx)
	VMAXPS(hx, m.AsX(), m.AsX())
	VMOVSHDUP(m.AsX(), hx)
	VMAXSS(hx, m.AsX(), m.AsX()) // amax
	d, h := XMM(), XMM()
	VDIVSS(c127, m.AsX(), d) // d = amax/127
	VCVTPS2PH(U8(0), d, h)
	VPEXTRW(U8(0), h, Mem{Base: dst})
	id := ZMM()
	VXORPS(id.AsX(), id.AsX(), id.AsX())
	VUCOMISS(zero, m.AsX())
	JE(LabelRef("scaled"))          // amax = 0: id = 0
	VDIVSS(m.AsX(), c127, id.AsX()) // id = 127/amax
	Label("scaled")
	VBROADCASTSS(id.AsX(), id)
	VMULPS(id, v0, v0)
	VMULPS(id, v1, v1)
	VCVTPS2DQ(v0, v0)
	VCVTPS2DQ(v1, v1)
	VPMOVDB(v0, Mem{Base: dst, Disp: 2})
	VPMOVDB(v1, Mem{Base: dst, Disp: 18})
	ADDQ(U8(128), x)
	ADDQ(U8(34), dst)
	DECQ(blocks)
	JNZ(LabelRef("qblock"))
	VZEROUPPER()
	RET()
}

var avx2Ones16 Mem

// avx2Data emits the AVX2 kernels' shared constant: 16-bit ones, for
// VPMADDWD.
func avx2Data() {
	avx2Ones16 = GLOBL("avx2ones16", attr.RODATA|attr.NOPTR)
	for i := 0; i < 16; i++ {
		DATA(2*i, U16(1))
	}
}

// swiglu generates swiglu: dst = silu(gate)·up on blocks of 16, as
// ggml_vec_swiglu_f32's AVX-512 loop computes it (ggml_v_silu with
// ggml_v_expf: a Cody–Waite reduction by ln 2, a degree-5 polynomial and
// VSCALEFPS; |n| > 192 gives 0 or +Inf).
func swiglu() {
	TEXT("swiglu", NOSPLIT, "func(dst *float32, gate *float32, up *float32, blocks int)")
	Doc("swiglu sets 16·blocks floats of dst to silu(gate)·up, as ggml's AVX-512 code does.")
	Pragma("noescape")
	dst := Load(Param("dst"), GP64())
	gate := Load(Param("gate"), GP64())
	up := Load(Param("up"), GP64())
	blocks := Load(Param("blocks"), GP64())
	c := func(bits uint32) reg.VecVirtual {
		r := GP32()
		MOVL(U32(bits), r)
		z := ZMM()
		VPBROADCASTD(r, z)
		return z
	}
	shifter, log2e, ln2hi, ln2lo := c(0x4b400000), c(0x3fb8aa3b), c(0x3f317200), c(0x35bfbe8e)
	c192, c1, c2, c3, c4, c5 := c(0x43400000), c(0x3c072010), c(0x3d2b9f17), c(0x3e2aaf33), c(0x3efffedb), c(0x3f7ffff6)
	one, inf, absMask := c(0x3f800000), c(0x7f800000), c(0x7fffffff)
	zero := ZMM()
	VPXORD(zero, zero, zero)

	Label("silu")
	x, nx := ZMM(), ZMM()
	VMOVUPS(Mem{Base: gate}, x)
	VSUBPS(x, zero, nx) // −x
	// exp(−x):
	z, n, b := ZMM(), ZMM(), ZMM()
	VMOVAPS(shifter, z)
	VFMADD231PS(log2e, nx, z) // z = −x·log2e + 1.5·2²³
	VSUBPS(shifter, z, n)     // n = round(−x·log2e)
	VMOVAPS(nx, b)
	VFNMADD231PS(ln2hi, n, b) // b = −x − n·ln2hi
	VFNMADD231PS(ln2lo, n, b) //     − n·ln2lo
	an := ZMM()
	VANDPS(absMask, n, an)
	big := K()
	VCMPPS(U8(0x1e), c192, an, big) // |n| > 192 (GT_OQ)
	u, p1, p2, j := ZMM(), ZMM(), ZMM(), ZMM()
	VMULPS(b, b, u)
	VMOVAPS(c2, p1)
	VFMADD231PS(c1, b, p1)
	VMOVAPS(c4, p2)
	VFMADD231PS(c3, b, p2)
	VMOVAPS(one, j)
	VFMADD231PS(c5, b, j)
	VFMADD231PS(u, p1, p2)
	VFMADD231PS(u, p2, j)
	e := ZMM()
	VSCALEFPS(n, j, e) // j·2ⁿ
	KORTESTW(big, big)
	JZ(LabelRef("normal"))
	nonPos, alt := K(), ZMM()
	VCMPPS(U8(0x12), zero, n, nonPos) // n ≤ 0 (LE_OQ)
	VBLENDMPS(zero, inf, nonPos, alt) // n ≤ 0 ? 0 : +Inf
	VBLENDMPS(alt, e, big, e)
	Label("normal")
	VADDPS(one, e, e) // 1 + exp(−x)
	VDIVPS(e, x, x)   // silu(x) = x / (1 + exp(−x))
	VMULPS(Mem{Base: up}, x, x)
	VMOVUPS(x, Mem{Base: dst})
	ADDQ(U8(64), gate)
	ADDQ(U8(64), up)
	ADDQ(U8(64), dst)
	DECQ(blocks)
	JNZ(LabelRef("silu"))
	VZEROUPPER()
	RET()
}
