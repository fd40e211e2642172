package main

import (
	"fmt"
	"strings"

	"github.com/mmcloughlin/avo/attr"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// AVX2 kernels for Q4_0 and Q8_0 on CPUs without AVX-512 (most desktop
// x86), over the same packed layouts and Q8_0 activation planes as the
// AVX-512 kernels. In both layouts a 64-byte chunk holds 4 columns (Q8_0)
// or 2 × 4 columns (Q4_0) of 16 rows as 4 bytes per row, so a YMM register
// holds 8 rows, and rows 8–15 are the chunk's upper 32 bytes (w + 32) with
// their scales at sc + 16. With 16 YMM registers, 4 tokens is the widest
// tile that keeps every accumulator in a register, so prompt tiles run as
// 8 rows × 4 tokens (one half of a group, like q1_0x8avx2t<T>); a single
// token runs all 16 rows at once, which reads each weight line once, while
// it streams from memory, instead of half of it twice.
//
// The integer sum of each 32-column block is exact and then goes through
// the AVX-512 kernel's float steps (acc += float(sumi) · (d_w·d_x), with
// the same roundings), so the results are bit-identical to q4_0x16t<T> and
// q8_0x16t<T>.

var avx2Nibble, avx2Sign Mem

// avx2QuantKernels emits the constants and the Q4_0 and Q8_0 AVX2 kernels
// (1 and 4 tokens). It relies on avx2Data's ones16.
func avx2QuantKernels() {
	avx2Nibble = GLOBL("q4avx2nibble", attr.RODATA|attr.NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(0x0f))
	}
	avx2Sign = GLOBL("q8avx2sign", attr.RODATA|attr.NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(0x80))
	}
	q4_0AVX2(2, 1)
	q4_0AVX2(1, 4)
	q8_0AVX2(2, 1)
	q8_0AVX2(1, 4)
}

// avx2Header declares <name> with the signature the Go glue shares for
// both types and loads the pointers; negq is nil for Q8_0, which needs no
// offset term.
func avx2Header(typ string, H, T int) (w, sc, blocks, qs, negq, dk reg.Register) {
	name := fmt.Sprintf("%sx%davx2t%d", strings.ToLower(typ), 8*H, T)
	TEXT(name, NOSPLIT, "func(w *byte, sc *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int)")
	Doc(fmt.Sprintf("%s computes %d rows × %d tokens of a %s · Q8_0 product with AVX2.", name, 8*H, T, typ))
	Pragma("noescape")
	w = Load(Param("w"), GP64())
	sc = Load(Param("sc"), GP64())
	blocks = Load(Param("blocks"), GP64())
	qs = Load(Param("qs"), GP64())
	if typ == "Q4_0" {
		negq = Load(Param("negq"), GP64())
	}
	dk = Load(Param("dk"), GP64())
	return
}

// avx2Scale emits the AVX-512 kernels' per-block float step:
// acc[h·T+t] += float(sum[h·T+t]) · (d_w · d_x[t]) for row half h.
func avx2Scale(sc, dk reg.Register, H, T int, sum, acc []reg.VecVirtual) {
	for h := 0; h < H; h++ {
		dw := YMM()
		VCVTPH2PS(Mem{Base: sc, Disp: 16 * h}, dw)
		for t := 0; t < T; t++ {
			i := h*T + t
			VCVTDQ2PS(sum[i], sum[i])
			d := YMM()
			VBROADCASTSS(Mem{Base: dk, Disp: 4 * t}, d)
			VMULPS(d, dw, d)
			VFMADD231PS(sum[i], d, acc[i])
		}
	}
}

// avx2Tail advances to the next packed block (blockBytes of weights, one
// block of the activation planes), loops, and stores token t's rows at y +
// t·ldy.
func avx2Tail(blockBytes int, w, sc, blocks, qs, negq, dk reg.Register, H, T int, acc []reg.VecVirtual) {
	ADDQ(U32(blockBytes), w)
	ADDQ(U32(blockBytes), sc)
	ADDQ(U32(8*32), qs) // 8 groups × 8 tokens × 4 bytes
	if negq != nil {
		ADDQ(U32(32), negq)
	}
	ADDQ(U32(32), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			VMOVUPS(acc[h*T+t], Mem{Base: y, Disp: 32 * h})
		}
		if t+1 < T {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// avx2Prefetch prefetches the weights prefetchBlocks ahead into L2, as the
// AVX-512 kernels do (the hardware streamers stop at page boundaries; on
// Zen 4 with AVX-512 off, one thread read Q8_0 from memory at 11.6–14.0
// GB/s prefetching into L1, 14.6–17.3 into L2, three runs each).
func avx2Prefetch(w reg.Register, blockBytes int) {
	for off := 0; off < blockBytes; off += 64 {
		PREFETCHT2(Mem{Base: w, Disp: prefetchBlocks*blockBytes + off})
	}
}

func zeroed(n int) []reg.VecVirtual {
	v := make([]reg.VecVirtual, n)
	for i := range v {
		v[i] = YMM()
		VXORPS(v[i], v[i], v[i])
	}
	return v
}

// q4_0AVX2 generates q4_0x<8H>avx2t<T>. Codes u ∈ 0..15 go through
// VPMADDUBSW unsaturated (2·15·128 < 2¹⁵), and even the 8 groups of a block
// summed in int16 stay below 8·3840 = 30720, so one VPMADDWD per token and
// block widens them; the accumulator then gets −8·Σq from the negq plane.
func q4_0AVX2(H, T int) {
	w, sc, blocks, qs, negq, dk := avx2Header("Q4_0", H, T)
	mask := YMM()
	VMOVDQU(avx2Nibble, mask)
	acc := zeroed(H * T)
	Label("block")
	avx2Prefetch(w, 288)
	sum := make([]reg.VecVirtual, H*T)
	for p := 0; p < 4; p++ {
		// u[j][h]: group 2p+j of row half h.
		u := [2][]reg.VecVirtual{make([]reg.VecVirtual, H), make([]reg.VecVirtual, H)}
		for h := 0; h < H; h++ {
			v, lo, hi := YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: w, Disp: 64*p + 32*h}, v)
			VPAND(mask, v, lo)
			VPSRLW(U8(4), v, hi)
			VPAND(mask, hi, hi)
			u[0][h], u[1][h] = lo, hi
		}
		for j := range u {
			g := 2*p + j
			for t := 0; t < T; t++ {
				x := YMM()
				VPBROADCASTD(Mem{Base: qs, Disp: 32*g + 4*t}, x)
				for h := 0; h < H; h++ {
					i := h*T + t
					if g == 0 {
						sum[i] = YMM()
						VPMADDUBSW(x, u[j][h], sum[i])
					} else {
						prod := YMM()
						VPMADDUBSW(x, u[j][h], prod)
						VPADDW(prod, sum[i], sum[i])
					}
				}
			}
		}
	}
	for t := 0; t < T; t++ {
		off := YMM()
		VPBROADCASTD(Mem{Base: negq, Disp: 4 * t}, off)
		VPSLLD(U8(3), off, off)
		for h := 0; h < H; h++ {
			i := h*T + t
			VPMADDWD(avx2Ones16, sum[i], sum[i])
			VPADDD(off, sum[i], sum[i])
		}
	}
	avx2Scale(sc, dk, H, T, sum, acc)
	avx2Tail(288, w, sc, blocks, qs, negq, dk, H, T, acc)
}

// q8_0AVX2 generates q8_0x<8H>avx2t<T>. u = q + 128 overflows VPMADDUBSW's
// int16 pairs, so, as ggml's mul_sum_i8_pairs, the weights go back to q =
// u ^ 0x80 and the product is |q|·(x·sign q): |q| ≤ 128 unsigned and |x| ≤
// 127 (the Q8_0 quantizer rounds x·127/amax) keep a pair within 2·128·127
// = 32512. The sum is Σq_w·q_x directly, no offset; each group is widened
// by VPMADDWD before the next is added.
func q8_0AVX2(H, T int) {
	w, sc, blocks, qs, _, dk := avx2Header("Q8_0", H, T)
	sign := YMM()
	VMOVDQU(avx2Sign, sign)
	acc := zeroed(H * T)
	Label("block")
	avx2Prefetch(w, 544)
	sum := make([]reg.VecVirtual, H*T)
	for g := 0; g < 8; g++ {
		q, a := make([]reg.VecVirtual, H), make([]reg.VecVirtual, H)
		for h := 0; h < H; h++ {
			q[h], a[h] = YMM(), YMM()
			VPXOR(Mem{Base: w, Disp: 64*g + 32*h}, sign, q[h])
			VPABSB(q[h], a[h])
		}
		for t := 0; t < T; t++ {
			x := YMM()
			VPBROADCASTD(Mem{Base: qs, Disp: 32*g + 4*t}, x)
			for h := 0; h < H; h++ {
				i, prod := h*T+t, YMM()
				VPSIGNB(q[h], x, prod)
				VPMADDUBSW(prod, a[h], prod)
				if g == 0 {
					sum[i] = YMM()
					VPMADDWD(avx2Ones16, prod, sum[i])
				} else {
					VPMADDWD(avx2Ones16, prod, prod)
					VPADDD(prod, sum[i], sum[i])
				}
			}
		}
	}
	avx2Scale(sc, dk, H, T, sum, acc)
	avx2Tail(544, w, sc, blocks, qs, nil, dk, H, T, acc)
}
