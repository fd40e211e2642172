// Command avx2k writes infer/quant's AVX2 K-quant kernels
// (kquants_avx2_amd64.s), for x86 CPUs without AVX-512: the exact
// integer sums of rows against tokens' Q8_K activations (per sub-block
// for Q4_K, per ggml f32 lane for Q5_K and Q6_K), scaled in the portable
// kernels' float order, per row and token: by the assembly itself for
// Q4_K (its FMAs one per lane, as the scalar ones), by the Go side for
// the lanes of Q5_K and Q6_K. VPMADDUBSW (unsigned codes × signed activations,
// pairs of products in int16: at most 2·63·128, so it never saturates)
// and VPMADDWD with ones leave in each dword the four products of its
// bytes, as SDOT does.
//
//	go run ./avx2k -out ../kquants_avx2_amd64.s
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
)

var b bytes.Buffer

func emit(format string, args ...any) { fmt.Fprintf(&b, "\t"+format+"\n", args...) }

// broadcast fills Y(reg) with the 64-bit pattern v in every quadword.
func broadcast(reg int, v uint64) {
	emit("MOVQ $0x%016x, AX", v)
	emit("MOVQ AX, X%d", reg)
	emit("VPBROADCASTQ X%d, Y%d", reg, reg)
}

func bytes8(v byte) uint64 { return uint64(v) * 0x0101010101010101 }

// header starts a kernel over blocks super-blocks of one row (w) against
// one token (x); init zeroes its float accumulators.
func header(name string, init ...string) {
	fmt.Fprintf(&b, "\n// func %s(w, x *byte, blocks int, out *float32)\n// Requires: AVX, AVX2, F16C, FMA\nTEXT ·%s(SB), NOSPLIT, $0-32\n", name, name)
	emit("MOVQ w+0(FP), DI")
	emit("MOVQ x+8(FP), SI")
	emit("MOVQ blocks+16(FP), CX")
	emit("MOVQ out+24(FP), DX")
	for _, z := range init {
		emit("VXORPS %s, %s, %s", z, z, z)
	}
	emit("TESTQ CX, CX")
	emit("JZ done")
	broadcast(15, bytes8(0x0f))
	broadcast(14, 0x0001000100010001)
}

// f16 leaves in X(reg) the f16 at off(DI), widened (exact).
func f16(reg, off int) {
	emit("MOVWLZX %d(DI), AX", off)
	emit("VMOVD AX, X%d", reg)
	emit("VCVTPH2PS X%d, X%d", reg, reg)
}

// footer ends the loop over super-blocks; stores write the accumulators
// to out.
func footer(wBytes int, stores ...string) {
	emit("ADDQ $%d, DI", wBytes)
	emit("ADDQ $292, SI")
	emit("DECQ CX")
	emit("JNZ loop")
	fmt.Fprintf(&b, "done:\n")
	for _, st := range stores {
		emit("%s", st)
	}
	emit("VZEROUPPER")
	emit("RET")
}

// madd leaves in Y(dst) the dword sums of four products of Y(codes)
// (unsigned) and the 32 activation bytes at off(R9).
func madd(dst, codes, off int) {
	emit("VPMADDUBSW %d(R9), Y%d, Y%d", off, codes, dst)
	emit("VPMADDWD Y14, Y%d, Y%d", dst, dst)
}

// unpackK4 unpacks the 6-bit scales and mins of the super-block at DI as
// ggml does, in four dwords (sc 0–3, sc 4–7, m 0–3, m 4–7), widened to
// words in Y0 (sc 0–7, m 0–7); Y1 gets sc 0–7 in both halves.
func unpackK4() { unpackK4At("DI") }

// unpackK4At is unpackK4 for the super-block at row.
func unpackK4At(row string) {
	// utmp0..2 = the 12 scale bytes.
	emit("MOVL 4(%s), R10", row)
	emit("MOVL 8(%s), R11", row)
	emit("MOVL 12(%s), R12", row)
	// m 4–7: ((utmp2 >> 4) & 0x0f0f0f0f) | (((utmp1 >> 6) & 0x03030303) << 4)
	emit("MOVL R12, R13")
	emit("SHRL $4, R13")
	emit("ANDL $0x0f0f0f0f, R13")
	emit("MOVL R11, AX")
	emit("SHRL $6, AX")
	emit("ANDL $0x03030303, AX")
	emit("SHLL $4, AX")
	emit("ORL AX, R13")
	// m 0–3: utmp1 & 0x3f3f3f3f
	emit("ANDL $0x3f3f3f3f, R11")
	// sc 4–7: (utmp2 & 0x0f0f0f0f) | (((utmp0 >> 6) & 0x03030303) << 4)
	emit("ANDL $0x0f0f0f0f, R12")
	emit("MOVL R10, AX")
	emit("SHRL $6, AX")
	emit("ANDL $0x03030303, AX")
	emit("SHLL $4, AX")
	emit("ORL AX, R12")
	// sc 0–3: utmp0 & 0x3f3f3f3f
	emit("ANDL $0x3f3f3f3f, R10")
	emit("VMOVD R10, X0")
	emit("VPINSRD $1, R12, X0, X0")
	emit("VPINSRD $2, R11, X0, X0")
	emit("VPINSRD $3, R13, X0, X0")
	emit("VPMOVZXBW X0, Y0")             // words: sc 0–7, m 0–7
	emit("VPERM2I128 $0x00, Y0, Y0, Y1") // sc 0–7 in both halves
}

// minsK4 leaves in X7 Σ_j m_j·(bsum_2j + bsum_2j+1), the mins' integer
// of Q4_K and Q5_K (Q8_K's bsums at 260(SI)), as a float (VCVTDQ2PS
// rounds to nearest even, as Go's conversion).
func minsK4() {
	// The mins against the bsums' pair sums.
	emit("VMOVDQU 260(SI), Y2")
	emit("VEXTRACTI128 $1, Y2, X3")
	emit("VPHADDW X3, X2, X2")
	emit("VEXTRACTI128 $1, Y0, X3")
	emit("VPMADDWD X2, X3, X3")
	emit("VPHADDD X3, X3, X3")
	emit("VPHADDD X3, X3, X3")
	emit("VCVTDQ2PS X3, X7")
}

// q4_K: out[2b] = Σ_j sc_j·Σ q·x over the sub-blocks j of super-block
// b, out[2b+1] = Σ_j m_j·(bsum_2j + bsum_2j+1), the two integers of
// ggml_vec_dot_q4_K_q8_K (144-byte blocks: scales at 4, qs at 16; Q8_K's
// bsums at 260). The 6-bit scales and mins are unpacked as ggml does, in
// four dwords (sc 0–3, sc 4–7, m 0–3, m 4–7), then widened to words;
// VPMADDWD by a broadcast scale instead of ones weighs each sub-block.
func q4_K() {
	header("q4_KRowAVX2", "X10", "X11")
	fmt.Fprintf(&b, "loop:\n")
	// Decoding streams the rows from memory, one after the other: 16
	// super-blocks ahead (2304 bytes) measured ~6% faster on the 1.7B than
	// the hardware prefetchers alone (1152 or less: no gain, 9216: less);
	// into L2, not L1: 7.5–7.9 → 13.5–14.3 GB/s on one Zen 4 thread from
	// memory (Q6_K's rows 10.4–16.7 → 16.4–18.1).
	for off := 0; off < 144; off += 64 {
		emit("PREFETCHT2 %d(DI)", 2304+off)
	}
	emit("LEAQ 4(SI), R9")
	unpackK4()
	minsK4()
	// The scaled sums.
	emit("VPXOR Y4, Y4, Y4")
	for p := 0; p < 4; p++ {
		emit("VMOVDQU %d(DI), Y2", 16+32*p)
		emit("VPSRLW $4, Y2, Y3")
		emit("VPAND Y15, Y2, Y2")
		emit("VPAND Y15, Y3, Y3")
		for h := 0; h < 2; h++ {
			j := 2*p + h
			emit("VPSHUFB scaleK4<>+%d(SB), Y1, Y5", 32*j)
			emit("VPMADDUBSW %d(R9), Y%d, Y6", 32*j, 2+h)
			emit("VPMADDWD Y5, Y6, Y6")
			emit("VPADDD Y6, Y4, Y4")
		}
	}
	emit("VEXTRACTI128 $1, Y4, X5")
	emit("VPADDD X5, X4, X4")
	emit("VPHADDD X4, X4, X4")
	emit("VPHADDD X4, X4, X4")
	// acc = fma(sumi, d_w·dx, acc) and accm = fma(mins, dmin_w·dx, accm),
	// as dotQ4_K (ggml's repacked Q4_K order); acc − accm is taken by the
	// caller.
	emit("VCVTDQ2PS X4, X4")
	emit("VMOVSS (SI), X1")
	f16(0, 0)
	f16(2, 2)
	emit("VMULSS X1, X0, X0")
	emit("VFMADD231SS X0, X4, X10")
	emit("VMULSS X1, X2, X2")
	emit("VFMADD231SS X2, X7, X11")
	footer(144, "VMOVSS X10, (DX)", "VMOVSS X11, 4(DX)")
}

// q4_K4 is q4_K for four rows (w, w+wstride, …) against one token,
// which share the token's bsums and the reductions: out[2r] and
// out[2r+1] are row r's scales' and mins' sums, kept interleaved in one
// register so that one conversion and one FMA a super-block serve all
// four rows, each lane rounding as q4_K's scalar FMAs do.
func q4_K4() {
	fmt.Fprintf(&b, "\n// func q4_KRow4AVX2(w, x *byte, wstride, ahead, blocks int, out *float32)\n// Requires: AVX, AVX2, F16C, FMA\nTEXT ·q4_KRow4AVX2(SB), NOSPLIT, $0-48\n")
	emit("MOVQ w+0(FP), DI")
	emit("MOVQ x+8(FP), SI")
	emit("MOVQ wstride+16(FP), R8")
	emit("MOVQ ahead+24(FP), DX") // from a row to the one it prefetches
	emit("MOVQ blocks+32(FP), CX")
	emit("LEAQ (DI)(R8*1), BX")
	emit("LEAQ (DI)(R8*2), R9")
	emit("LEAQ (BX)(R8*2), R8") // row 3; row 2 in R9, 1 in BX, 0 in DI
	emit("VXORPS Y13, Y13, Y13")
	emit("TESTQ CX, CX")
	emit("JZ done")
	broadcast(15, bytes8(0x0f))
	rows := []string{"DI", "BX", "R9", "R8"}
	fmt.Fprintf(&b, "loop:\n")
	// Decoding streams the matrix from memory, four rows at once: the
	// hardware prefetchers alone leave the loads waiting (a third slower
	// on the 1.7B's output head), so each row fetches its super-block in
	// a group of rows ahead (ahead bytes on, a whole number of groups).
	for _, r := range rows {
		for off := 0; off < 144; off += 64 {
			emit("PREFETCHT2 %d(%s)(DX*1)", off, r)
		}
	}
	// X14 = the token's bsums in pairs, the sums of its sub-blocks.
	emit("VMOVDQU 260(SI), Y2")
	emit("VEXTRACTI128 $1, Y2, X3")
	emit("VPHADDW X3, X2, X14")
	for r, row := range rows {
		unpackK4At(row)
		// Row r's mins against the pairs, four dwords, added up pairwise
		// with the other rows' into X6 = the four rows' mins.
		emit("VEXTRACTI128 $1, Y0, X0")
		emit("VPMADDWD X14, X0, X0")
		switch r {
		case 0:
			emit("VMOVDQA X0, X6")
		case 1:
			emit("VPHADDD X0, X6, X6")
		case 2:
			emit("VMOVDQA X0, X7")
		case 3:
			emit("VPHADDD X0, X7, X7")
			emit("VPHADDD X7, X6, X6")
		}
		acc := 8 + r
		for p := 0; p < 4; p++ {
			emit("VMOVDQU %d(%s), Y2", 16+32*p, row)
			emit("VPSRLW $4, Y2, Y3")
			emit("VPAND Y15, Y2, Y2")
			emit("VPAND Y15, Y3, Y3")
			for h := 0; h < 2; h++ {
				j := 2*p + h
				emit("VPSHUFB scaleK4<>+%d(SB), Y1, Y4", 32*j)
				emit("VPMADDUBSW %d(SI), Y%d, Y5", 4+32*j, 2+h)
				if j == 0 {
					emit("VPMADDWD Y4, Y5, Y%d", acc)
				} else {
					emit("VPMADDWD Y4, Y5, Y5")
					emit("VPADDD Y5, Y%d, Y%d", acc, acc)
				}
			}
		}
	}
	// X8 = the four rows' scaled sums; Y0 = (sumi, mins) of rows 0…3.
	emit("VPHADDD Y9, Y8, Y8")
	emit("VPHADDD Y11, Y10, Y10")
	emit("VPHADDD Y10, Y8, Y8")
	emit("VEXTRACTI128 $1, Y8, X9")
	emit("VPADDD X9, X8, X8")
	emit("VPUNPCKLDQ X6, X8, X0")
	emit("VPUNPCKHDQ X6, X8, X1")
	emit("VINSERTI128 $1, X1, Y0, Y0")
	emit("VCVTDQ2PS Y0, Y0")
	// Y2 = (d_w, dmin_w) of rows 0…3 widened, times dx.
	emit("MOVL (DI), AX")
	emit("VMOVD AX, X2")
	emit("VPINSRD $1, (BX), X2, X2")
	emit("VPINSRD $2, (R9), X2, X2")
	emit("VPINSRD $3, (R8), X2, X2")
	emit("VCVTPH2PS X2, Y2")
	emit("VBROADCASTSS (SI), Y3")
	emit("VMULPS Y3, Y2, Y2")
	emit("VFMADD231PS Y2, Y0, Y13")
	for _, r := range rows {
		emit("ADDQ $144, %s", r)
	}
	emit("ADDQ $292, SI")
	emit("DECQ CX")
	emit("JNZ loop")
	fmt.Fprintf(&b, "done:\n")
	emit("MOVQ out+40(FP), DX")
	emit("VMOVUPS Y13, (DX)")
	emit("VZEROUPPER")
	emit("RET")
}

// q4_KGemm is q4_K in the float order of ggml's repacked gemm
// (dotQ4_KGemm): out[0] and out[1] are the scales' and the mins' sums with
// one FMA per pair of sub-blocks 2p, 2p+1 instead of one per super-block.
func q4_KGemm() {
	header("q4_KGemmRowAVX2", "X10", "X11")
	fmt.Fprintf(&b, "loop:\n")
	emit("LEAQ 4(SI), R9")
	unpackK4()
	// X8 = d_w·dx, X9 = dmin_w·dx.
	emit("VMOVSS (SI), X12")
	f16(8, 0)
	f16(9, 2)
	emit("VMULSS X12, X8, X8")
	emit("VMULSS X12, X9, X9")
	// X7 = the pairs' mins m_2p·b_2p + m_2p+1·b_2p+1 as floats (exact: at
	// most 2·63·32·128), as minsK4 before its final sums.
	emit("VMOVDQU 260(SI), Y2")
	emit("VEXTRACTI128 $1, Y2, X3")
	emit("VPHADDW X3, X2, X2")
	emit("VEXTRACTI128 $1, Y0, X3")
	emit("VPMADDWD X2, X3, X3")
	emit("VCVTDQ2PS X3, X7")
	for p := 0; p < 4; p++ {
		emit("VPXOR Y4, Y4, Y4")
		emit("VMOVDQU %d(DI), Y2", 16+32*p)
		emit("VPSRLW $4, Y2, Y3")
		emit("VPAND Y15, Y2, Y2")
		emit("VPAND Y15, Y3, Y3")
		for h := 0; h < 2; h++ {
			j := 2*p + h
			emit("VPSHUFB scaleK4<>+%d(SB), Y1, Y5", 32*j)
			emit("VPMADDUBSW %d(R9), Y%d, Y6", 32*j, 2+h)
			emit("VPMADDWD Y5, Y6, Y6")
			emit("VPADDD Y6, Y4, Y4")
		}
		emit("VEXTRACTI128 $1, Y4, X5")
		emit("VPADDD X5, X4, X4")
		emit("VPHADDD X4, X4, X4")
		emit("VPHADDD X4, X4, X4")
		emit("VCVTDQ2PS X4, X4")
		emit("VFMADD231SS X8, X4, X10")
		emit("VSHUFPS $%d, X7, X7, X13", 0x55*p)
		emit("VFMADD231SS X9, X13, X11")
	}
	footer(144, "VMOVSS X10, (DX)", "VMOVSS X11, 4(DX)")
}

// q4_KGemm4x is q4_KGemm for four tokens, which share the unpacking of
// each super-block's scales, mins and codes, over their activations
// interleaved (interleaveQ8_K4's layout, q4GroupBytes a super-block: the
// four dx at 0, the bsums' pair sums of tokens 0 and 2 at 16 and of 1 and
// 3 at 48, the quants at 80 in 32-byte steps k of sub-block j holding
// elements 4k…4k+3 of each token, then 16+4k…16+4k+3), so that one VPMADDUBSW
// against the row's codes broadcast by VPSHUFD serves all four tokens
// and leaves each dword a token's: four of them add up in int16 (at most
// 4·2·15·128), one VPMADDWD by the scale widens a sub-block, and a pair's
// sums need one lane fold instead of a reduction per token. The float
// order per token is q4_KGemm's.
func q4_KGemm4x() {
	fmt.Fprintf(&b, "\n// func q4_KGemm4xAVX2(w, x *byte, blocks int, out *float32)\n// Requires: AVX, AVX2, F16C, FMA\nTEXT ·q4_KGemm4xAVX2(SB), NOSPLIT, $0-32\n")
	emit("MOVQ w+0(FP), DI")
	emit("MOVQ x+8(FP), SI")
	emit("MOVQ blocks+16(FP), CX")
	emit("MOVQ out+24(FP), DX")
	emit("VXORPS X12, X12, X12")
	emit("VXORPS X13, X13, X13")
	emit("TESTQ CX, CX")
	emit("JZ done")
	broadcast(15, bytes8(0x0f))
	fmt.Fprintf(&b, "loop:\n")
	unpackK4()
	// X10 = d_w·dx, X11 = dmin_w·dx, the tokens in order.
	f16(10, 0)
	f16(11, 2)
	emit("VBROADCASTSS X10, X10")
	emit("VBROADCASTSS X11, X11")
	emit("VMULPS (SI), X10, X10")
	emit("VMULPS (SI), X11, X11")
	// The pairs' mins: the row's mins (m0–3 twice, m4–7 twice) against
	// the pair sums give (t0 p0, t0 p1, t2 p0, t2 p1 | t0 p2, t0 p3, t2 p2,
	// t2 p3) and the same for t1, t3; two unpacks put each pair's four
	// tokens in order, pairs 0 and 1 in the low lanes, 2 and 3 high.
	emit("VPERMQ $0xfa, Y0, Y0")
	emit("VPMADDWD 16(SI), Y0, Y2")
	emit("VPMADDWD 48(SI), Y0, Y3")
	emit("VPUNPCKLDQ Y3, Y2, Y4")
	emit("VPUNPCKHDQ Y3, Y2, Y5")
	emit("VPUNPCKLQDQ Y5, Y4, Y2") // pairs 0 and 2
	emit("VPUNPCKHQDQ Y5, Y4, Y3") // pairs 1 and 3
	emit("VCVTDQ2PS Y2, Y2")
	emit("VCVTDQ2PS Y3, Y3")
	emit("VFMADD231PS X11, X2, X13")
	emit("VFMADD231PS X11, X3, X13")
	emit("VEXTRACTF128 $1, Y2, X2")
	emit("VEXTRACTF128 $1, Y3, X3")
	emit("VFMADD231PS X11, X2, X13")
	emit("VFMADD231PS X11, X3, X13")
	for p := 0; p < 4; p++ {
		emit("VMOVDQU %d(DI), Y2", 16+32*p)
		emit("VPSRLW $4, Y2, Y3")
		emit("VPAND Y15, Y2, Y2")
		emit("VPAND Y15, Y3, Y3")
		for h := 0; h < 2; h++ {
			j := 2*p + h
			for k := 0; k < 4; k++ {
				emit("VPSHUFD $0x%02x, Y%d, Y4", 0x55*k, 2+h)
				if k == 0 {
					emit("VPMADDUBSW %d(SI), Y4, Y6", 80+32*(4*j+k))
				} else {
					emit("VPMADDUBSW %d(SI), Y4, Y5", 80+32*(4*j+k))
					emit("VPADDW Y5, Y6, Y6")
				}
			}
			emit("VPSHUFB scaleK4<>+%d(SB), Y1, Y9", 32*j)
			if h == 0 {
				emit("VPMADDWD Y9, Y6, Y8")
			} else {
				emit("VPMADDWD Y9, Y6, Y6")
				emit("VPADDD Y6, Y8, Y8")
			}
		}
		emit("VEXTRACTI128 $1, Y8, X9")
		emit("VPADDD X9, X8, X8")
		emit("VCVTDQ2PS X8, X8")
		emit("VFMADD231PS X10, X8, X12")
	}
	emit("ADDQ $144, DI")
	emit("ADDQ $%d, SI", 80+1024)
	emit("DECQ CX")
	emit("JNZ loop")
	fmt.Fprintf(&b, "done:\n")
	emit("VMOVUPS X12, (DX)")
	emit("VMOVUPS X13, 16(DX)")
	emit("VZEROUPPER")
	emit("RET")
}

// q4_KGemm8x is q4_KGemm4x for two groups of four tokens (x and
// x+xstride), which share the row's unpacking, codes and their VPSHUFD
// broadcasts: eight tokens to a float register, group 0 in the low lane.
func q4_KGemm8x() {
	fmt.Fprintf(&b, "\n// func q4_KGemm8xAVX2(w, x *byte, xstride int, blocks int, out *float32)\n// Requires: AVX, AVX2, F16C, FMA\nTEXT ·q4_KGemm8xAVX2(SB), NOSPLIT, $0-40\n")
	emit("MOVQ w+0(FP), DI")
	emit("MOVQ x+8(FP), SI")
	emit("MOVQ xstride+16(FP), BX")
	emit("ADDQ SI, BX")
	emit("MOVQ blocks+24(FP), CX")
	emit("MOVQ out+32(FP), DX")
	emit("VXORPS Y12, Y12, Y12")
	emit("VXORPS Y13, Y13, Y13")
	emit("TESTQ CX, CX")
	emit("JZ done")
	broadcast(15, bytes8(0x0f))
	fmt.Fprintf(&b, "loop:\n")
	unpackK4()
	// Y10 = d_w·dx, Y11 = dmin_w·dx, the eight tokens in order.
	emit("VMOVUPS (SI), X2")
	emit("VINSERTF128 $1, (BX), Y2, Y2")
	f16(10, 0)
	f16(11, 2)
	emit("VBROADCASTSS X10, Y10")
	emit("VBROADCASTSS X11, Y11")
	emit("VMULPS Y2, Y10, Y10")
	emit("VMULPS Y2, Y11, Y11")
	// The pairs' mins as in q4_KGemm4x, per group (Y2, Y3: group 0's
	// pairs 0|2 and 1|3; Y4, Y5 group 1's), then pair p's eight tokens.
	emit("VPERMQ $0xfa, Y0, Y0")
	for g, r := range []string{"SI", "BX"} {
		emit("VPMADDWD 16(%s), Y0, Y6", r)
		emit("VPMADDWD 48(%s), Y0, Y7", r)
		emit("VPUNPCKLDQ Y7, Y6, Y8")
		emit("VPUNPCKHDQ Y7, Y6, Y9")
		emit("VPUNPCKLQDQ Y9, Y8, Y%d", 2+2*g)
		emit("VPUNPCKHQDQ Y9, Y8, Y%d", 3+2*g)
	}
	for p := 0; p < 4; p++ {
		imm := 0x20 // the low lanes: pairs 0, 1
		if p >= 2 {
			imm = 0x31
		}
		emit("VPERM2I128 $0x%02x, Y%d, Y%d, Y6", imm, 4+p%2, 2+p%2)
		emit("VCVTDQ2PS Y6, Y6")
		emit("VFMADD231PS Y11, Y6, Y13")
	}
	for p := 0; p < 4; p++ {
		emit("VMOVDQU %d(DI), Y2", 16+32*p)
		emit("VPSRLW $4, Y2, Y3")
		emit("VPAND Y15, Y2, Y2")
		emit("VPAND Y15, Y3, Y3")
		for h := 0; h < 2; h++ {
			j := 2*p + h
			for k := 0; k < 4; k++ {
				emit("VPSHUFD $0x%02x, Y%d, Y4", 0x55*k, 2+h)
				off := 80 + 32*(4*j+k)
				if k == 0 {
					emit("VPMADDUBSW %d(SI), Y4, Y6", off)
					emit("VPMADDUBSW %d(BX), Y4, Y7", off)
				} else {
					emit("VPMADDUBSW %d(SI), Y4, Y5", off)
					emit("VPADDW Y5, Y6, Y6")
					emit("VPMADDUBSW %d(BX), Y4, Y5", off)
					emit("VPADDW Y5, Y7, Y7")
				}
			}
			emit("VPSHUFB scaleK4<>+%d(SB), Y1, Y14", 32*j)
			if h == 0 {
				emit("VPMADDWD Y14, Y6, Y8")
				emit("VPMADDWD Y14, Y7, Y9")
			} else {
				emit("VPMADDWD Y14, Y6, Y6")
				emit("VPADDD Y6, Y8, Y8")
				emit("VPMADDWD Y14, Y7, Y7")
				emit("VPADDD Y7, Y9, Y9")
			}
		}
		// Fold the lanes: (g0 lo, g1 lo) + (g0 hi, g1 hi).
		emit("VPERM2I128 $0x20, Y9, Y8, Y6")
		emit("VPERM2I128 $0x31, Y9, Y8, Y7")
		emit("VPADDD Y7, Y6, Y6")
		emit("VCVTDQ2PS Y6, Y6")
		emit("VFMADD231PS Y10, Y6, Y12")
	}
	emit("ADDQ $144, DI")
	emit("ADDQ $%d, SI", 80+1024)
	emit("ADDQ $%d, BX", 80+1024)
	emit("DECQ CX")
	emit("JNZ loop")
	fmt.Fprintf(&b, "done:\n")
	emit("VMOVUPS Y12, (DX)")
	emit("VMOVUPS Y13, 32(DX)")
	emit("VZEROUPPER")
	emit("RET")
}

// scaleK4 is VPSHUFB's masks that broadcast word j of a 128-bit half
// (sub-block j's scale) to its eight words, j = 0…7.
func scaleK4() {
	for j := 0; j < 8; j++ {
		for i := 0; i < 32; i += 2 {
			fmt.Fprintf(&b, "DATA scaleK4<>+%d(SB)/1, $%d\n", 32*j+i, 2*j)
			fmt.Fprintf(&b, "DATA scaleK4<>+%d(SB)/1, $%d\n", 32*j+i+1, 2*j+1)
		}
	}
	fmt.Fprintf(&b, "GLOBL scaleK4<>(SB), RODATA|NOPTR, $256\n")
}

// q5_K: out[16b+l] = Σ_j sc_j·Σ over elements 4l…4l+3 of sub-block j of
// (q + 16·high bit j)·x, ggml's eight lanes, and out[16b+8] the mins'
// integer (176-byte blocks: scales at 4, qh at 16, qs at 48).
func q5_K() {
	header("q5_KRowAVX2", "Y10", "X11")
	broadcast(13, bytes8(0x10))
	fmt.Fprintf(&b, "loop:\n")
	emit("LEAQ 4(SI), R9")
	unpackK4()
	minsK4()
	// d = dy·d_w, dmin = −dy·dmin_w; summs = fma(dmin, mins, summs).
	emit("VMOVSS (SI), X5") // Y1 holds the scales
	f16(8, 0)
	f16(9, 2)
	emit("VMULSS X8, X5, X8")
	emit("VMULSS X9, X5, X9")
	emit("VMOVD X9, AX")
	emit("XORL $0x80000000, AX")
	emit("VMOVD AX, X9")
	emit("VFMADD231SS X7, X9, X11")
	emit("VBROADCASTSS X8, Y8")
	emit("VMOVDQU 16(DI), Y12")
	emit("VPXOR Y4, Y4, Y4")
	for j := 0; j < 8; j++ {
		if j%2 == 0 {
			emit("VMOVDQU %d(DI), Y2", 48+32*(j/2))
			emit("VPSRLW $4, Y2, Y3")
			emit("VPAND Y15, Y2, Y2")
			emit("VPAND Y15, Y3, Y3")
		}
		// Bit j of qh moved to bit 4 by a word shift: the bits that cross
		// between the bytes of a word fall outside the 0x10 mask.
		switch {
		case j < 4:
			emit("VPSLLW $%d, Y12, Y5", 4-j)
		case j == 4:
			emit("VMOVDQA Y12, Y5")
		default:
			emit("VPSRLW $%d, Y12, Y5", j-4)
		}
		emit("VPAND Y13, Y5, Y5")
		emit("VPOR Y%d, Y5, Y5", 2+j%2)
		emit("VPSHUFB scaleK4<>+%d(SB), Y1, Y6", 32*j)
		emit("VPMADDUBSW %d(R9), Y5, Y5", 32*j)
		emit("VPMADDWD Y6, Y5, Y5")
		emit("VPADDD Y5, Y4, Y4")
	}
	// acc = fma(d, lanes, acc), lane by lane.
	emit("VCVTDQ2PS Y4, Y4")
	emit("VFMADD231PS Y4, Y8, Y10")
	footer(176, "VMOVUPS Y10, (DX)", "VMOVSS X11, 32(DX)")
}

// q6_K: out[8b+l] = ggml's lane l: Σ over the 32-element chunks c of
// sc·Σ over elements 32c+4l … 32c+4l+3 of u·x, u = q+32 the unsigned code,
// minus 32·(bsum_2l·sc_2l + bsum_2l+1·sc_2l+1) (210-byte blocks: ql at 0,
// qh at 128, scales at 192). Quarter q of half h: the low nibbles of
// ql[64h+l] (q 0) or ql[64h+32+l] (q 1), their high nibbles for q 2 and 3,
// and bits 2q, 2q+1 of qh[32h+l] at bits 4 and 5 (16-bit shifts: the bits
// a word shift carries across bytes fall outside the 0x30 mask). A chunk's
// low 16 elements have scale 2c, its high ones 2c+1.
func q6_K() {
	header("q6_KRowAVX2", "Y12")
	broadcast(13, bytes8(0x30))
	fmt.Fprintf(&b, "loop:\n")
	emit("LEAQ 4(SI), R9")
	emit("VPMOVSXBW 192(DI), Y8")         // sc 0–15 as words
	emit("VPERM2I128 $0x00, Y8, Y8, Y9")  // sc 0–7 in both halves
	emit("VPERM2I128 $0x11, Y8, Y8, Y10") // sc 8–15 in both halves
	emit("VPXOR Y11, Y11, Y11")
	for h := 0; h < 2; h++ {
		emit("VMOVDQU %d(DI), Y0", 64*h)
		emit("VMOVDQU %d(DI), Y1", 64*h+32)
		emit("VMOVDQU %d(DI), Y2", 128+32*h)
		for q := 0; q < 4; q++ {
			src := q % 2
			if q < 2 {
				emit("VPAND Y15, Y%d, Y3", src)
			} else {
				emit("VPSRLW $4, Y%d, Y3", src)
				emit("VPAND Y15, Y3, Y3")
			}
			switch q {
			case 0:
				emit("VPSLLW $4, Y2, Y4")
			case 1:
				emit("VPSLLW $2, Y2, Y4")
			case 2:
				emit("VMOVDQA Y2, Y4")
			case 3:
				emit("VPSRLW $2, Y2, Y4")
			}
			emit("VPAND Y13, Y4, Y4")
			emit("VPOR Y4, Y3, Y3")
			c := 4*h + q
			scales := 9 + c/4
			emit("VPSHUFB scaleK6<>+%d(SB), Y%d, Y5", 32*(c%4), scales)
			emit("VPMADDUBSW %d(R9), Y3, Y3", 32*c)
			emit("VPMADDWD Y5, Y3, Y3")
			emit("VPADDD Y3, Y11, Y11")
		}
	}
	// The −32 offset through the bsums: pairs (2l, 2l+1) · their scales.
	emit("VMOVDQU 260(SI), Y0")
	emit("VPMADDWD Y8, Y0, Y0")
	emit("VPSLLD $5, Y0, Y0")
	emit("VPSUBD Y0, Y11, Y11")
	// acc = fma(dy·d_w, lanes, acc), lane by lane.
	emit("VCVTDQ2PS Y11, Y11")
	emit("VMOVSS (SI), X1")
	f16(0, 208)
	emit("VMULSS X0, X1, X1")
	emit("VBROADCASTSS X1, Y1")
	emit("VFMADD231PS Y11, Y1, Y12")
	footer(210, "VMOVUPS Y12, (DX)")
}

// scaleK6 is VPSHUFB's masks for Q6_K's chunk c (c mod 4 = k): word 2k of
// the low half to all its words, word 2k+1 of the high half to all of its.
func scaleK6() {
	for k := 0; k < 4; k++ {
		for i := 0; i < 32; i += 2 {
			w := 2 * k
			if i >= 16 {
				w++
			}
			fmt.Fprintf(&b, "DATA scaleK6<>+%d(SB)/1, $%d\n", 32*k+i, 2*w)
			fmt.Fprintf(&b, "DATA scaleK6<>+%d(SB)/1, $%d\n", 32*k+i+1, 2*w+1)
		}
	}
	fmt.Fprintf(&b, "GLOBL scaleK6<>(SB), RODATA|NOPTR, $128\n")
}

func main() {
	out := flag.String("out", "../kquants_avx2_amd64.s", "output file")
	flag.Parse()
	b.WriteString("// Code generated by infer/quant/asm/avx2k. DO NOT EDIT.\n\n#include \"textflag.h\"\n")
	q4_K()
	q4_K4()
	q4_KGemm()
	q4_KGemm4x()
	q4_KGemm8x()
	q5_K()
	q6_K()
	b.WriteString("\n")
	scaleK4()
	scaleK6()
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
