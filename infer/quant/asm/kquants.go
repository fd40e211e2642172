package main

// K-quant kernels, generated into their own file (kquants_amd64.s) so they
// can change without regenerating the core set:
//
//	cd asm && BONSAI_ASM_SET=kquants go run . -out ../kquants_amd64.s -stubs ../kquants_stub_amd64.go -pkg quant
//
// Q4_K × Q8_K. The packed block (16 rows × 256 columns, 2368 bytes, built
// by layoutQ4_K in kquants_amd64.go):
//
//	   0  32 × 64 B  chunk 8k+g: byte 4r+e = row r's qs[32k+4g+e], i.e. the
//	                 codes of columns 64k+4g+e (low nibble, sub-block 2k)
//	                 and 64k+32+4g+e (high nibble, sub-block 2k+1)
//	2048  [8][16]u8  sub-block scales sc_j of each row
//	2176  [4][16][2]u8 mins (m_2k, m_2k+1) of each row
//	2304  [16]f16    d
//	2336  [16]f16    dmin
//
// The activations come as the Q8_0 kernels' planes (fillPlanesQ8_K): qs
// interleaved per 4-byte group for a tile of 8 tokens; per super-block,
// 256 bytes of the dk plane hold the f32 d of 8 tokens, then Q8_K's sums
// per 32 columns as int16 pairs (b_2k, b_2k+1) for Q4_K; 256 bytes of the
// negq plane hold −(sums per 16) as int16 pairs for Q6_K.
//
// Per super-block and token, with u the 4-bit codes:
//
//	s_j   = Σ_{32 columns} u·q          exact (VPDPBUSD)
//	sumi  = Σ_j sc_j·s_j                exact (VPMULLD)
//	mins  = Σ_j m_j·b_j                 exact (VPDPWSSD)
//	acc   = fma(float(sumi), d·dx, acc)
//	accm  = fma(float(mins), dmin·dx, accm)   (in the frame)
//
// and acc − accm at the end, which is dotQ4_K's arithmetic (ggml's
// repacked Q4_K gemv), float rounding steps included, so the kernel and
// the portable code agree to the last bit. The gemm variants (suffix g)
// make the two FMAs once per pair of sub-blocks instead, as dotQ4_KGemm
// (ggml's repacked gemm).
//
// The high nibbles are not shifted down per chunk: u = code·16 (v & 0xf0)
// fits a byte, s_j comes out 16 times too large and exact, and one VPSRAD
// per sub-block and token divides it back.

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const (
	q4kBlockBytes = 2368
	q4kScales     = 2048
	q4kMins       = 2176
	q4kD          = 2304
	q4kDmin       = 2336
	q4kPrefetch   = 8 // super-blocks (18.5 KiB) ahead; see prefetcher
)

func kquantsMain() {
	for _, gemm := range []bool{false, true} {
		for _, t := range []int{1, 2, 4, 8} {
			q4kKernel(t, gemm)
		}
	}
	for _, t := range []int{1, 2, 4, 8} {
		q6kKernel(t)
	}
	for _, t := range []int{1, 2, 4, 8} {
		q5kKernel(t)
	}
	Generate()
}

// vpdpwssdBcst emits VPDPWSSD.BCST m32, a, acc: acc += Σ₂ a(s16)·m(s16) per
// lane, m one broadcast dword (avo v0.5.0 predates AVX512_VNNI).
func vpdpwssdBcst(m Mem, a, acc reg.VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPWSSD",
		Suffixes: []string{"BCST"},
		Operands: []Op{m, a, acc},
		Inputs:   []Op{m, a, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI"},
	})
}

// q4kKernel generates q4_Kx16t<T>: 16 rows × T tokens of Q4_K · Q8_K, with
// the signature of the other x16 kernels (negq and dk are the Q8_K planes
// described above). With gemm it generates q4_Kx16t<T>g instead, whose
// floats round as dotQ4_KGemm's (ggml's repacked gemm): one FMA per pair
// of sub-blocks instead of one per super-block, for the scales and the
// mins alike.
func q4kKernel(T int, gemm bool) {
	name := fmt.Sprintf("q4_Kx16t%d", T)
	if gemm {
		name += "g"
	}
	TEXT(name, 0, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a q4_K · Q8_K product.", name, T))
	Pragma("noescape")
	frame := AllocLocal(64 * T)
	accMins := func(t int) Mem { return frame.Offset(64 * t) }
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	dk := Load(Param("dk"), GP64())
	lowMask, highMask := broadcastByte(0x0f), broadcastByte(0xf0)

	acc := make([]reg.VecVirtual, T)
	sumi := make([]reg.VecVirtual, T)
	s := make([]reg.VecVirtual, T)
	zero := ZMM() // zeroing goes through it, as in q6kKernel
	VPXORD(zero, zero, zero)
	for t := range acc {
		acc[t], sumi[t], s[t] = ZMM(), ZMM(), ZMM()
		VMOVAPS(zero, acc[t])
		VMOVUPS(zero, accMins(t))
	}
	// scaled adds fma(float(v[t]), scale·dx, sum(t)) for every token, scale
	// the 16 rows' f16 at off (d or dmin); sum(t) is acc[t] or the frame.
	scaled := func(v []reg.VecVirtual, off int, mins bool) {
		sc := ZMM()
		VCVTPH2PS(Mem{Base: w, Disp: off}, sc)
		for t := 0; t < T; t++ {
			a := ZMM()
			VCVTDQ2PS(v[t], v[t])
			VMULPS_BCST(Mem{Base: dk, Disp: 4 * t}, sc, a)
			if !mins {
				VFMADD231PS(a, v[t], acc[t])
				continue
			}
			m := ZMM()
			VMOVUPS(accMins(t), m)
			VFMADD231PS(a, v[t], m)
			VMOVUPS(m, accMins(t))
		}
	}

	Label("block")
	pf := prefetcher{w: w, ahead: q4kPrefetch * q4kBlockBytes, blockBytes: q4kBlockBytes}
	for j := 0; j < 8; j++ {
		k, odd := j/2, j%2 == 1
		for t := 0; t < T; t++ {
			VPXORD(s[t], s[t], s[t])
		}
		for g := 0; g < 8; g++ {
			pf.next()
			u := ZMM()
			if odd {
				VPANDD(Mem{Base: w, Disp: 64 * (8*k + g)}, highMask, u)
			} else {
				VPANDD(Mem{Base: w, Disp: 64 * (8*k + g)}, lowMask, u)
			}
			for t := 0; t < T; t++ {
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*(8*j+g) + 4*t}, u, s[t])
			}
		}
		sc := ZMM()
		VPMOVZXBD(Mem{Base: w, Disp: q4kScales + 16*j}, sc)
		for t := 0; t < T; t++ {
			if odd {
				VPSRAD(U8(4), s[t], s[t])
			}
			if j == 0 || gemm && !odd {
				VPMULLD(sc, s[t], sumi[t])
			} else {
				VPMULLD(sc, s[t], s[t])
				VPADDD(s[t], sumi[t], sumi[t])
			}
		}
		if gemm && odd {
			scaled(sumi, q4kD, false)
		}
	}
	// Mins: s[t] = Σ_j m_j·b_j, over the super-block or (gemm) per pair.
	for k := 0; k < 4; k++ {
		if k == 0 || gemm {
			for t := 0; t < T; t++ {
				VPXORD(s[t], s[t], s[t])
			}
		}
		m := ZMM()
		VPMOVZXBW(Mem{Base: w, Disp: q4kMins + 32*k}, m)
		for t := 0; t < T; t++ {
			vpdpwssdBcst(Mem{Base: dk, Disp: 32 + 32*k + 4*t}, m, s[t])
		}
		if gemm {
			scaled(s, q4kDmin, true)
		}
	}
	if !gemm {
		scaled(sumi, q4kD, false)
		scaled(s, q4kDmin, true)
	}
	ADDQ(U32(q4kBlockBytes), w)
	ADDQ(U32(8*256), qs) // 64 groups × 8 tokens × 4 bytes
	ADDQ(U32(256), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	for t := range acc {
		VSUBPS(accMins(t), acc[t], acc[t])
	}
	storeRows(acc)
}

// Q6_K × Q8_K. The packed block (16 rows × 256 columns, 3360 bytes like
// the file's, built by layoutQ6_K), u the 6-bit code q + 32 and group G
// columns 4G…4G+3 of sub-block i = G/4:
//
//	   0  48 × 64 B  chunk 3i+k (k < 3): byte 4r+e = u of row r, column e
//	                 of group 4i+k in bits 0-5, and bits 2k, 2k+1 of group
//	                 4i+3's u in bits 6-7
//	3072  [16][16]i8 sub-block scales of each row
//	3328  [16]f16    d
//
// Three groups of a sub-block are one AND each, the fourth six ops (see
// q6kExpand): 9 per sub-block, where nibble and 2-bit planes took 13, the
// bulk of the one-token kernel's work (decode runs it near the memory's
// speed, so the bytes stay the file's 6.56 bits per weight).
//
// The sum follows dotQ6_K (ggml's AVX2 order, which infer/parity relies on
// to match llama.cpp to the bit): per super-block eight integer lanes per
// row, lane l collecting the 4-column groups G ≡ l (mod 8),
//
//	lane[l] = Σ_i sc_i·S_G (G = 4i + l%4, i ≡ l/4 mod 2) − 32·Σ_{i=2l,2l+1} sc_i·b_i
//
// (S_G = Σ u·q over the group, |S_G| ≤ 4·63·128 fits an int16, so
// VPDPWSSD with (sc_i, 0) words multiplies it exactly; b_i Q8_K's sum per
// 16 columns), then acc[l] = fma(dx·d, float(lane[l]), acc[l]) and at the
// end ((a4+a0)+(a6+a2)) + ((a5+a1)+(a7+a3)). Eight lanes per token do not
// fit the registers beyond two tokens, so the float lanes live in a stack
// frame and tokens go through the integer part two at a time.
const (
	q6kBlockBytes = 3360
	q6kScales     = 3072
	q6kD          = 3328
	q6kPrefetch   = 6 // 19.7 KiB
)

func q6kKernel(T int) {
	name := fmt.Sprintf("q6_Kx16t%d", T)
	// Not NOSPLIT: the float lanes (and the expanded weights) need a frame
	// of up to 8 KiB.
	TEXT(name, 0, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a q6_K · Q8_K product.", name, T))
	Pragma("noescape")
	// Beyond one token the expanded u of a super-block (4 KiB) is written
	// to the frame once and read back by each pair of tokens.
	expandOnce := T > 1
	frameBytes := T * 8 * 64
	if expandOnce {
		frameBytes += 64 * 64
	}
	frame := AllocLocal(frameBytes)
	expanded := frame.Offset(T * 8 * 64)
	lane := func(t, l int) Mem { return frame.Offset(512*t + 64*l) }
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	bs := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	c := q6kConsts()
	// avo takes VPXORD x, x, x for a read of x, which would keep every
	// lane register live around the loop: zeroing goes through one
	// register instead.
	zero := ZMM()
	VPXORD(zero, zero, zero)
	for t := 0; t < T; t++ {
		for l := 0; l < 8; l++ {
			VMOVUPS(zero, lane(t, l))
		}
	}

	Label("block")
	pf := prefetcher{w: w, ahead: q6kPrefetch * q6kBlockBytes, blockBytes: q6kBlockBytes}
	if expandOnce {
		for i := 0; i < 16; i++ {
			for m, u := range q6kExpand(w, i, c) {
				VMOVDQU64(u, expanded.Offset(64*(4*i+m)))
			}
		}
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: q6kD}, dw)
	for t0 := 0; t0 < T; t0 += 2 {
		toks := min(2, T-t0)
		li := make([][8]reg.VecVirtual, toks)
		for t := range li {
			for l := range li[t] {
				li[t][l] = ZMM()
				VPXORD(zero, zero, li[t][l])
			}
		}
		for i := 0; i < 16; i++ {
			sc, off := ZMM(), ZMM()
			VPMOVSXBW(Mem{Base: w, Disp: q6kScales + 16*i}, sc.AsY())
			VPMOVZXWD(sc.AsY(), sc) // (sc_i, 0) words
			// −32·sc_i·b_i with b_i from the pair (−b_2L, −b_2L+1): 32·sc_i
			// goes in the word of b_i, the other word 0 (a dword shift by
			// 5 would carry into it).
			if i%2 == 0 {
				VPSLLW(U8(5), sc, off)
			} else {
				VPSLLD(U8(21), sc, off)
			}
			var us [4]reg.VecVirtual
			if !expandOnce {
				us = q6kExpand(w, i, c)
			}
			for m := 0; m < 4; m++ {
				if t0 == 0 {
					pf.next()
				}
				G, l := 4*i+m, 4*(i%2)+m
				u := us[m]
				if expandOnce {
					u = ZMM()
					VMOVDQU64(expanded.Offset(64*G), u)
				}
				for t := 0; t < toks; t++ {
					s := ZMM()
					VPXORD(zero, zero, s)
					vpdpbusdBcst(Mem{Base: qs, Disp: 32*G + 4*(t0+t)}, u, s)
					vpdpwssd(s, sc, li[t][l])
				}
			}
			for t := 0; t < toks; t++ {
				vpdpwssdBcst(Mem{Base: bs, Disp: 32*(i/2) + 4*(t0+t)}, off, li[t][i/2])
			}
		}
		for t := 0; t < toks; t++ {
			d := ZMM()
			VMULPS_BCST(Mem{Base: dk, Disp: 4 * (t0 + t)}, dw, d)
			for l := 0; l < 8; l++ {
				a := ZMM()
				VCVTDQ2PS(li[t][l], li[t][l])
				VMOVUPS(lane(t0+t, l), a)
				VFMADD231PS(li[t][l], d, a)
				VMOVUPS(a, lane(t0+t, l))
			}
		}
	}
	ADDQ(U32(q6kBlockBytes), w)
	ADDQ(U32(8*256), qs)
	ADDQ(U32(256), bs)
	ADDQ(U32(256), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	storeLaneSums(T, lane, false)
}

// vpdpwssd emits VPDPWSSD b, a, acc: acc += Σ₂ a(s16)·b(s16) per lane.
func vpdpwssd(b, a, acc reg.VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPWSSD",
		Operands: []Op{b, a, acc},
		Inputs:   []Op{b, a, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512VNNI"},
	})
}

// q6kConsts are the byte masks q6kExpand uses: 0x3f, 0x03, 0x0c, 0x30.
func q6kConsts() [4]reg.VecVirtual {
	return [4]reg.VecVirtual{broadcastByte(0x3f), broadcastByte(0x03), broadcastByte(0x0c), broadcastByte(0x30)}
}

// q6kExpand emits the expansion of sub-block i's groups 4i…4i+3 to 16 rows
// × 4 bytes of u each: groups 0-2 are their chunk's low six bits (one AND
// each); group 3 gathers its bit pairs from the chunks' top bits (three
// shifts, an AND and two AND-ORs in VPTERNLOGD, imm 0xf8: a | b&c).
func q6kExpand(w reg.Register, i int, c [4]reg.VecVirtual) [4]reg.VecVirtual {
	var u [4]reg.VecVirtual
	chunk := func(k int) Mem { return Mem{Base: w, Disp: 64 * (3*i + k)} }
	for k := 0; k < 3; k++ {
		u[k] = ZMM()
		VPANDD(chunk(k), c[0], u[k])
	}
	x, y := ZMM(), ZMM()
	VPSRLW(U8(6), chunk(0), x)
	VPANDD(x, c[1], x)
	VPSRLW(U8(4), chunk(1), y)
	VPTERNLOGD(U8(0xf8), y, c[2], x)
	VPSRLW(U8(2), chunk(2), y)
	VPTERNLOGD(U8(0xf8), y, c[3], x)
	u[3] = x
	return u
}

// Q5_K × Q8_K. The packed block (16 rows × 256 columns, 2816 bytes like
// the file's, built by layoutQ5_K):
//
//	   0  32 × 64 B  the low 4 bits, as Q4_K's chunks
//	2048  [64]u64    word 8j+g: bit 4r+e = row r's 5th bit of column
//	                 32j+4g+e (bit j of qh[4g+e]), a byte mask for VPADDB
//	2560   3 × 64 B  chunk i: dword r = row r's scales[4i…4i+3], the
//	                 file's 6-bit packing (D0, D1, D2 below)
//	2752  [16]f16    d
//	2784  [16]f16    dmin
//
// Unpacking the scales and mins costs ~70 vector ops per super-block,
// shared by the tokens; unpacked they would add 64 bytes (2%) to stream
// per super-block in decode, which is bandwidth-bound (one core runs the
// one-token kernel at ~25 GB/s from L2, two share ~22 GB/s of memory).
//
// The sum follows dotQ5_K (ggml's AVX2 order): per super-block eight
// integer lanes per row, lane l collecting the 4-column groups 8j+l,
//
//	lane[l] = Σ_j sc_j·S_{8j+l}        S = Σ u·q over the group
//	mins    = Σ_j m_j·b_j              b_j Q8_K's sum per 32, as Q4_K
//
// (u the 5-bit codes), then acc[l] = fma(dx·d, float(lane[l]), acc[l]) and
// summs = fma(−(dx·dmin), float(mins), summs), and at the end
// ((a4+a0)+(a6+a2)) + ((a5+a1)+(a7+a3)) + summs. As for Q6_K the float
// lanes live in the frame and tokens go through the integer part two at a
// time, reading the expanded codes back from the frame beyond one token.
//
// VPMADDUBSW forms S as two int16 halves (|half| ≤ 2·31·128, no
// saturation) and VPDPWSSD with (sc_j, sc_j) words scales and adds both,
// exactly: two VNNI-port ops per group and token, where a zeroed VPDPBUSD
// accumulator would cost a third op.
const (
	q5kBlockBytes = 2816
	q5kHigh       = 2048
	q5kScales     = 2560
	q5kD          = 2752
	q5kDmin       = 2784
	q5kPrefetch   = 7 // 19.3 KiB
)

func q5kKernel(T int) {
	name := fmt.Sprintf("q5_Kx16t%d", T)
	TEXT(name, 0, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a q5_K · Q8_K product.", name, T))
	Pragma("noescape")
	expandOnce := T > 1
	frameBytes := T*9*64 + 8*64
	if expandOnce {
		frameBytes += 64 * 64
	}
	frame := AllocLocal(frameBytes)
	scales := frame.Offset(T * 9 * 64)
	expanded := frame.Offset(T*9*64 + 8*64)
	lane := func(t, l int) Mem { return frame.Offset(576*t + 64*l) } // l = 8: summs
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	dk := Load(Param("dk"), GP64())
	m0f, m10 := broadcastByte(0x0f), broadcastByte(0x10)
	dmask := [3]reg.VecVirtual{broadcastDword(63), broadcastDword(0x0f), broadcastDword(0x30)}
	zero := ZMM() // zeroing goes through it, as in q6kKernel
	VPXORD(zero, zero, zero)
	for t := 0; t < T; t++ {
		for l := 0; l < 9; l++ {
			VMOVUPS(zero, lane(t, l))
		}
	}

	Label("block")
	pf := prefetcher{w: w, ahead: q5kPrefetch * q5kBlockBytes, blockBytes: q5kBlockBytes}
	if expandOnce {
		for G := 0; G < 64; G++ {
			VMOVDQU64(q5kExpand(w, G/8, G%8, m0f, m10), expanded.Offset(64*G))
		}
	}
	// The scales as (sc_j, sc_j) words, once for every pair of tokens.
	for j := 0; j < 8; j++ {
		sc, x := q5kScale(w, dmask, 0, j), ZMM()
		VPSLLD(U8(16), sc, x)
		VPORD(x, sc, sc)
		VMOVDQU64(sc, scales.Offset(64*j))
	}
	// Mins: summs[t] = fma(−(dx·dmin), float(Σ_j m_j·b_j), summs[t]).
	{
		pairs := make([]reg.VecVirtual, 4)
		for k := range pairs {
			lo, hi := q5kScale(w, dmask, 1, 2*k), q5kScale(w, dmask, 1, 2*k+1)
			VPSLLD(U8(16), hi, hi)
			VPORD(hi, lo, lo)
			pairs[k] = lo
		}
		dmin := ZMM()
		VCVTPH2PS(Mem{Base: w, Disp: q5kDmin}, dmin)
		for t := 0; t < T; t++ {
			s, dd, a := ZMM(), ZMM(), ZMM()
			VPXORD(zero, zero, s)
			for k := 0; k < 4; k++ {
				vpdpwssdBcst(Mem{Base: dk, Disp: 32 + 32*k + 4*t}, pairs[k], s)
			}
			VCVTDQ2PS(s, s)
			VMULPS_BCST(Mem{Base: dk, Disp: 4 * t}, dmin, dd)
			VMOVUPS(lane(t, 8), a)
			VFNMADD231PS(s, dd, a) // −(dx·dmin) rounds as dx·dmin, negated
			VMOVUPS(a, lane(t, 8))
		}
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: q5kD}, dw)
	for t0 := 0; t0 < T; t0 += 2 {
		toks := min(2, T-t0)
		li := make([][8]reg.VecVirtual, toks)
		for t := range li {
			for l := range li[t] {
				li[t][l] = ZMM()
				VPXORD(zero, zero, li[t][l])
			}
		}
		for j := 0; j < 8; j++ {
			sc := ZMM()
			VMOVDQU64(scales.Offset(64*j), sc)
			for g := 0; g < 8; g++ {
				if t0 == 0 {
					pf.next()
				}
				G := 8*j + g
				var u reg.VecVirtual
				if expandOnce {
					u = ZMM()
					VMOVDQU64(expanded.Offset(64*G), u)
				} else {
					u = q5kExpand(w, j, g, m0f, m10)
				}
				for t := 0; t < toks; t++ {
					q, p := ZMM(), ZMM()
					VPBROADCASTD(Mem{Base: qs, Disp: 32*G + 4*(t0+t)}, q)
					VPMADDUBSW(q, u, p)
					vpdpwssd(p, sc, li[t][g])
				}
			}
		}
		for t := 0; t < toks; t++ {
			d := ZMM()
			VMULPS_BCST(Mem{Base: dk, Disp: 4 * (t0 + t)}, dw, d)
			for l := 0; l < 8; l++ {
				a := ZMM()
				VCVTDQ2PS(li[t][l], li[t][l])
				VMOVUPS(lane(t0+t, l), a)
				VFMADD231PS(li[t][l], d, a)
				VMOVUPS(a, lane(t0+t, l))
			}
		}
	}
	ADDQ(U32(q5kBlockBytes), w)
	ADDQ(U32(8*256), qs)
	ADDQ(U32(256), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	storeLaneSums(T, lane, true)
}

// storeLaneSums stores, for each token t, the sum of its eight f32 lane
// accumulators lane(t, 0…7) in ggml's AVX2 order (4+0)+(6+2) + (5+1)+(7+3),
// plus lane(t, 8) (Q5_K's mins term) when withMins, at y + t·ldy, rows in
// rowMask only, and returns.
func storeLaneSums(T int, lane func(t, l int) Mem, withMins bool) {
	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	mask := Load(Param("rowMask"), GP32())
	kstore := K()
	KMOVW(mask, kstore)
	n := 8
	if withMins {
		n = 9
	}
	for t := 0; t < T; t++ {
		a := make([]reg.VecVirtual, n)
		for l := range a {
			a[l] = ZMM()
			VMOVUPS(lane(t, l), a[l])
		}
		VADDPS(a[0], a[4], a[4])
		VADDPS(a[2], a[6], a[6])
		VADDPS(a[1], a[5], a[5])
		VADDPS(a[3], a[7], a[7])
		VADDPS(a[6], a[4], a[4])
		VADDPS(a[7], a[5], a[5])
		VADDPS(a[5], a[4], a[4])
		if withMins {
			VADDPS(a[8], a[4], a[4])
		}
		VMOVUPS(a[4], kstore, Mem{Base: y})
		if t+1 < T {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// q5kExpand emits the 5-bit codes of group 8j+g (columns 32j+4g…+3) for
// 16 rows × 4 bytes: the nibble of sub-block j, plus 16 where the 5th bit
// is set. The bits come as a ready byte mask: a KMOVQ load instead of
// shifting and masking a qh byte per sub-block.
func q5kExpand(w reg.Register, j, g int, m0f, m10 reg.VecVirtual) reg.VecVirtual {
	lo := Mem{Base: w, Disp: 64 * (8*(j/2) + g)}
	u, k := ZMM(), K()
	KMOVQ(Mem{Base: w, Disp: q5kHigh + 8*(8*j+g)}, k)
	if j%2 == 0 {
		VPANDD(lo, m0f, u)
	} else {
		VPSRLW(U8(4), lo, u)
		VPANDD(u, m0f, u)
	}
	VPADDB(m10, u, k, u)
	return u
}

// q5kScale emits sub-block j's 6-bit scale (which = 0) or min (which = 1)
// of 16 rows, one per dword lane (get_scale_min_k4 on the dwords D0, D1,
// D2 of the packed scales): j < 4, byte j of D_which & 63; else the low 4
// bits from byte j−4 of D2 (low nibble for the scale, high for the min)
// and the high 2 from the top of byte j−4 of D_which. m holds the dword
// masks 63, 0x0f and 0x30.
func q5kScale(w reg.Register, m [3]reg.VecVirtual, which, j int) reg.VecVirtual {
	dq := func(i int) Mem { return Mem{Base: w, Disp: q5kScales + 64*i} }
	v := ZMM()
	if j < 4 {
		m63 := m[0]
		if j == 0 {
			VPANDD(dq(which), m63, v)
		} else {
			VPSRLD(U8(8*j), dq(which), v)
			VPANDD(v, m63, v)
		}
		return v
	}
	i := j - 4
	m0f, m30 := m[1], m[2]
	if sh := 8*i + 4*which; sh == 0 {
		VPANDD(dq(2), m0f, v)
	} else {
		VPSRLD(U8(sh), dq(2), v)
		VPANDD(v, m0f, v)
	}
	x := ZMM()
	VPSRLD(U8(8*i+2), dq(which), x)
	VPTERNLOGD(U8(0xf8), m30, x, v)
	return v
}

// broadcastDword returns v in every dword lane.
func broadcastDword(v uint32) reg.VecVirtual {
	r := GP32()
	MOVL(U32(v), r)
	z := ZMM()
	VPBROADCASTD(r, z)
	return z
}

// prefetcher spreads the prefetch of the super-block ahead bytes past w
// over a block's loop, one cache line per call to next (a K-quant loop
// makes 64 calls, one per group of columns, for at most 53 lines), into
// L2 (PREFETCHT2). On Zen 4 all of a block's lines at once into L1
// (PREFETCHT0) held the loads up behind the misses: the one-token kernels
// ran at 12.3 (Q4_K) and 10.1 (Q6_K) GB/s per core from memory, 17.3 and
// 13.7 with no prefetch, 16.4 and 17.9 spread into L2 ~19 KiB ahead
// (BenchmarkKernel, 151936×2048, best of 4).
type prefetcher struct {
	w                 reg.Register
	ahead, blockBytes int
	off               int // the next line's offset in the block
}

func (p *prefetcher) next() {
	if p.off >= p.blockBytes {
		return
	}
	PREFETCHT2(Mem{Base: p.w, Disp: p.ahead + p.off})
	p.off += 64
}
