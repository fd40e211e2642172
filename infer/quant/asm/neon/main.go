// Command neon writes infer/quant's arm64 kernels (neon_arm64.s): for each
// type, the exact integer sums of one row's blocks (or sub-blocks, or
// SDOT lanes) against Q8_0 or Q8_K activations, which the Go side then
// scales in the portable kernels' float order. Each kernel comes in two
// variants: with the dot-product extension (SDOT) and with plain Advanced
// SIMD, where SMULL, SADDLP and ADDP add the same four products per lane.
//
// Go's arm64 assembler lacks SDOT, SMULL, SADDLP, ADDP (vector), USHL and
// the integer MLA, so those are written as WORD with their encodings.
//
//	go run ./neon -out ../neon_arm64.s
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

func word(enc uint32, comment string) { emit("WORD $0x%08x // %s", enc, comment) }

// The vector instructions Go's assembler does not know, on 128-bit
// registers (d, n, m: V register numbers).
func sdotV(d, n, m int) {
	word(0x4e809400|uint32(m)<<16|uint32(n)<<5|uint32(d), fmt.Sprintf("SDOT V%d.4S, V%d.16B, V%d.16B", d, n, m))
}
func smull(d, n, m int) {
	word(0x0e20c000|uint32(m)<<16|uint32(n)<<5|uint32(d), fmt.Sprintf("SMULL V%d.8H, V%d.8B, V%d.8B", d, n, m))
}
func smull2(d, n, m int) {
	word(0x4e20c000|uint32(m)<<16|uint32(n)<<5|uint32(d), fmt.Sprintf("SMULL2 V%d.8H, V%d.16B, V%d.16B", d, n, m))
}
func saddlp(d, n int) {
	word(0x4e602800|uint32(n)<<5|uint32(d), fmt.Sprintf("SADDLP V%d.4S, V%d.8H", d, n))
}
func addp(d, n, m int) {
	word(0x4ea0bc00|uint32(m)<<16|uint32(n)<<5|uint32(d), fmt.Sprintf("ADDP V%d.4S, V%d.4S, V%d.4S", d, n, m))
}
func addS(d, n, m int) {
	word(0x4ea08400|uint32(m)<<16|uint32(n)<<5|uint32(d), fmt.Sprintf("ADD V%d.4S, V%d.4S, V%d.4S", d, n, m))
}

// Scratch registers of the plain-NEON SDOT.
const t0, t1 = 30, 31

// dot adds to lane i of V(acc) the four products of bytes 4i…4i+3 of V(n)
// and V(m), as signed bytes: SDOT, or its plain-NEON equivalent.
func dot(sdot bool, acc, n, m int) {
	if sdot {
		sdotV(acc, n, m)
		return
	}
	smull(t0, n, m)
	smull2(t1, n, m)
	saddlp(t0, t0)
	saddlp(t1, t1)
	addp(t0, t0, t1)
	addS(acc, acc, t0)
}

func zero(v int) { emit("VEOR V%d.B16, V%d.B16, V%d.B16", v, v, v) }

// reduce4 leaves in V(d) the four lane sums of V(a), V(b), V(c), V(e).
func reduce4(d, a, bb, c, e int) {
	addp(a, a, bb)
	addp(c, c, e)
	addp(d, a, c)
}

func header(name string, frame string) {
	fmt.Fprintf(&b, "\n// func %s\nTEXT ·%s(SB), NOSPLIT, $0-%s\n", name, name[:bytes.IndexByte([]byte(name), '(')], frame)
	emit("MOVD w+0(FP), R0")
	emit("MOVD x+8(FP), R1")
	emit("MOVD blocks+16(FP), R2")
	emit("MOVD out+24(FP), R3")
	emit("CBZ R2, done")
}

func footer() {
	fmt.Fprintf(&b, "done:\n")
	emit("RET")
}

func variant(sdot bool) string {
	if sdot {
		return "Sdot"
	}
	return "Neon"
}

// q8_0: out[b] = Σ w·x over block b (34-byte blocks on both sides).
func q8_0(sdot bool) {
	header(fmt.Sprintf("q8_0Sums%s(w, x *byte, blocks int, out *int32)", variant(sdot)), "32")
	fmt.Fprintf(&b, "loop:\n")
	emit("ADD $2, R0, R4")
	emit("ADD $2, R1, R5")
	emit("VLD1 (R4), [V0.B16, V1.B16]")
	emit("VLD1 (R5), [V2.B16, V3.B16]")
	zero(4)
	dot(sdot, 4, 0, 2)
	dot(sdot, 4, 1, 3)
	emit("VADDV V4.S4, V4")
	emit("FMOVS F4, (R3)")
	emit("ADD $4, R3")
	emit("ADD $34, R0")
	emit("ADD $34, R1")
	emit("SUBS $1, R2")
	emit("BNE loop")
	footer()
}

// q4_0: out[b] = Σ (q−8)·x over block b (18-byte weight blocks: the low
// nibbles are elements 0–15, the high ones 16–31).
func q4_0(sdot bool) {
	header(fmt.Sprintf("q4_0Sums%s(w, x *byte, blocks int, out *int32)", variant(sdot)), "32")
	emit("VMOVI $15, V16.B16")
	emit("VMOVI $8, V17.B16")
	fmt.Fprintf(&b, "loop:\n")
	emit("ADD $2, R0, R4")
	emit("ADD $2, R1, R5")
	emit("VLD1 (R4), [V0.B16]")
	emit("VLD1 (R5), [V2.B16, V3.B16]")
	emit("VUSHR $4, V0.B16, V1.B16")
	emit("VAND V16.B16, V0.B16, V0.B16")
	emit("VSUB V17.B16, V0.B16, V0.B16")
	emit("VSUB V17.B16, V1.B16, V1.B16")
	zero(4)
	dot(sdot, 4, 0, 2)
	dot(sdot, 4, 1, 3)
	emit("VADDV V4.S4, V4")
	emit("FMOVS F4, (R3)")
	emit("ADD $4, R3")
	emit("ADD $18, R0")
	emit("ADD $34, R1")
	emit("SUBS $1, R2")
	emit("BNE loop")
	footer()
}

// q2_0: out[2b+k] = Σ (q−1)·x over the 32 elements of Q8_0 block k of
// weight block b (64 elements in 18 bytes, element e in bits 2(e%4) of
// byte e/4). With T_s = code s of every byte and X_s = bytes s, s+4, …
// of the activations (VLD4), T_s·X_s over the 16 bytes covers both
// halves: lanes 0–1 are block k=0, lanes 2–3 block k=1.
func q2_0(sdot bool) {
	header(fmt.Sprintf("q2_0Sums%s(w, x *byte, blocks int, out *int32)", variant(sdot)), "32")
	emit("VMOVI $3, V16.B16")
	emit("VMOVI $1, V17.B16")
	fmt.Fprintf(&b, "loop:\n")
	emit("ADD $2, R0, R4")
	emit("VLD1 (R4), [V0.B16]")
	emit("ADD $2, R1, R5")
	emit("VLD4 (R5), [V4.B8, V5.B8, V6.B8, V7.B8]")
	emit("ADD $36, R1, R5")
	emit("VLD4 (R5), [V8.B8, V9.B8, V10.B8, V11.B8]")
	for s := 0; s < 4; s++ {
		emit("VMOV V%d.D[0], V%d.D[1]", 8+s, 4+s)
	}
	emit("VAND V16.B16, V0.B16, V12.B16")
	emit("VUSHR $2, V0.B16, V13.B16")
	emit("VUSHR $4, V0.B16, V14.B16")
	emit("VUSHR $6, V0.B16, V15.B16")
	emit("VAND V16.B16, V13.B16, V13.B16")
	emit("VAND V16.B16, V14.B16, V14.B16")
	zero(18)
	for s := 0; s < 4; s++ {
		emit("VSUB V17.B16, V%d.B16, V%d.B16", 12+s, 12+s)
		dot(sdot, 18, 12+s, 4+s)
	}
	addp(18, 18, 18)
	emit("FMOVD F18, (R3)")
	emit("ADD $8, R3")
	emit("ADD $18, R0")
	emit("ADD $68, R1")
	emit("SUBS $1, R2")
	emit("BNE loop")
	footer()
}

// q4_K: out[8b+j] = Σ q·x over sub-block j of super-block b (unsigned
// nibbles, without scale or min; 144-byte weight blocks, Q8_K activations
// of 292 bytes with the quants at 4).
func q4_K(sdot bool) {
	header(fmt.Sprintf("q4_KSums%s(w, x *byte, blocks int, out *int32)", variant(sdot)), "32")
	emit("VMOVI $15, V16.B16")
	fmt.Fprintf(&b, "loop:\n")
	emit("ADD $16, R0, R4")
	emit("ADD $4, R1, R5")
	for half := 0; half < 2; half++ {
		// Sub-blocks 4half … 4half+3 into V20–V23.
		for p := 0; p < 2; p++ {
			emit("VLD1.P 32(R4), [V0.B16, V1.B16]")
			emit("VLD1.P 64(R5), [V4.B16, V5.B16, V6.B16, V7.B16]")
			emit("VUSHR $4, V0.B16, V2.B16")
			emit("VUSHR $4, V1.B16, V3.B16")
			emit("VAND V16.B16, V0.B16, V0.B16")
			emit("VAND V16.B16, V1.B16, V1.B16")
			lo, hi := 20+2*p, 21+2*p
			zero(lo)
			zero(hi)
			dot(sdot, lo, 0, 4)
			dot(sdot, lo, 1, 5)
			dot(sdot, hi, 2, 6)
			dot(sdot, hi, 3, 7)
		}
		reduce4(24, 20, 21, 22, 23)
		emit("VST1.P [V24.S4], 16(R3)")
	}
	emit("ADD $144, R0")
	emit("ADD $292, R1")
	emit("SUBS $1, R2")
	emit("BNE loop")
	footer()
}

// q5_K: out[64b+8j+l] = Σ over elements 4l…4l+3 of sub-block j of
// (q + 16·high bit)·x: the SDOT lanes, which ggml's eight f32 lanes
// keep apart (176-byte weight blocks: qh at 16, qs at 48).
func q5_K(sdot bool) {
	header(fmt.Sprintf("q5_KSums%s(w, x *byte, blocks int, out *int32)", variant(sdot)), "32")
	emit("VMOVI $15, V16.B16")
	fmt.Fprintf(&b, "loop:\n")
	emit("ADD $16, R0, R4")
	emit("VLD1.P 32(R4), [V8.B16, V9.B16]") // qh; R4 now at qs
	emit("ADD $4, R1, R5")
	for j := 0; j < 8; j++ {
		if j%2 == 0 {
			emit("VLD1.P 32(R4), [V0.B16, V1.B16]")
			emit("VUSHR $4, V0.B16, V2.B16")
			emit("VUSHR $4, V1.B16, V3.B16")
			emit("VAND V16.B16, V0.B16, V0.B16")
			emit("VAND V16.B16, V1.B16, V1.B16")
		}
		q0, q1 := 2*(j%2), 2*(j%2)+1
		// The high bit j of qh, moved to bit 4.
		emit("VMOVI $%d, V17.B16", 1<<j)
		emit("VAND V17.B16, V8.B16, V10.B16")
		emit("VAND V17.B16, V9.B16, V11.B16")
		switch {
		case j < 4:
			emit("VSHL $%d, V10.B16, V10.B16", 4-j)
			emit("VSHL $%d, V11.B16, V11.B16", 4-j)
		case j > 4:
			emit("VUSHR $%d, V10.B16, V10.B16", j-4)
			emit("VUSHR $%d, V11.B16, V11.B16", j-4)
		}
		emit("VORR V10.B16, V%d.B16, V10.B16", q0)
		emit("VORR V11.B16, V%d.B16, V11.B16", q1)
		emit("VLD1.P 32(R5), [V4.B16, V5.B16]")
		zero(20)
		zero(21)
		dot(sdot, 20, 10, 4)
		dot(sdot, 21, 11, 5)
		emit("VST1.P [V20.S4, V21.S4], 32(R3)")
	}
	emit("ADD $176, R0")
	emit("ADD $292, R1")
	emit("SUBS $1, R2")
	emit("BNE loop")
	footer()
}

// q6_K: out[64b+4g+i] = Σ over elements 16g+4i … 16g+4i+3 of u·x, with
// u = q+32 the unsigned 6-bit code (210-byte weight blocks: ql at 0, qh
// at 128). Group g's lanes are ggml's lanes 4(g%2)+i.
func q6_K(sdot bool) {
	header(fmt.Sprintf("q6_KSums%s(w, x *byte, blocks int, out *int32)", variant(sdot)), "32")
	emit("VMOVI $15, V16.B16")
	emit("VMOVI $48, V17.B16")
	fmt.Fprintf(&b, "loop:\n")
	emit("MOVD R0, R4")      // ql
	emit("ADD $128, R0, R6") // qh
	emit("ADD $4, R1, R5")
	for half := 0; half < 2; half++ {
		emit("VLD1.P 64(R4), [V0.B16, V1.B16, V2.B16, V3.B16]") // ql[l], l = 0…31; ql[l+32]
		emit("VLD1.P 32(R6), [V4.B16, V5.B16]")                 // qh[l]
		emit("VLD1.P 64(R5), [V24.B16, V25.B16, V26.B16, V27.B16]")
		emit("VLD1.P 64(R5), [V12.B16, V13.B16, V14.B16, V15.B16]")
		// Quarter q (elements 32q + l): low nibble of ql[l] (q 0), ql[l+32]
		// (q 1), high nibbles for q 2, 3; qh bits 2q, 2q+1 at bits 4, 5.
		xs := [4][2]int{{24, 25}, {26, 27}, {12, 13}, {14, 15}}
		for q := 0; q < 4; q++ {
			for L := 0; L < 2; L++ {
				ql := L + 2*(q%2) // V0,V1: ql[l]; V2,V3: ql[l+32]
				emit("VMOV V%d.B16, V6.B16", ql)
				if q >= 2 {
					emit("VUSHR $4, V6.B16, V6.B16")
				} else {
					emit("VAND V16.B16, V6.B16, V6.B16")
				}
				h := 4 + L
				switch q {
				case 0:
					emit("VSHL $4, V%d.B16, V7.B16", h)
				case 1:
					emit("VSHL $2, V%d.B16, V7.B16", h)
				case 2:
					emit("VMOV V%d.B16, V7.B16", h)
				case 3:
					emit("VUSHR $2, V%d.B16, V7.B16", h)
				}
				emit("VAND V17.B16, V7.B16, V7.B16")
				emit("VORR V7.B16, V6.B16, V6.B16")
				zero(20)
				dot(sdot, 20, 6, xs[q][L])
				emit("VST1.P [V20.S4], 16(R3)")
			}
		}
	}
	emit("ADD $210, R0")
	emit("ADD $292, R1")
	emit("SUBS $1, R2")
	emit("BNE loop")
	footer()
}

func main() {
	out := flag.String("out", "../neon_arm64.s", "output file")
	flag.Parse()
	b.WriteString("// Code generated by infer/quant/asm/neon. DO NOT EDIT.\n\n#include \"textflag.h\"\n")
	for _, sdot := range []bool{true, false} {
		q8_0(sdot)
		q4_0(sdot)
		q2_0(sdot)
		q4_K(sdot)
		q5_K(sdot)
		q6_K(sdot)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
