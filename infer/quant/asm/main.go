// Command asm generates infer/quant's AVX-512 VNNI kernels with avo:
//
//	go run ./asm -out simd_amd64.s -stubs simd_stub_amd64.go -pkg quant
//
// (run from infer/quant; see the go:generate line in simd_amd64.go).
//
// The kernels work on weights repacked at load into groups of 16 rows
// (infer/quant/repack.go) so that one 512-bit register holds the same four
// columns of 16 rows: VPDPBUSD then yields one lane per row, and the
// per-sub-block float scaling costs one multiply-add per 16 rows instead of
// one per row. The activations of a tile of up to 8 tokens are interleaved
// per 4-byte group, so each VPDPBUSD broadcasts one token's group from
// memory.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Layout constants shared with repack.go and simd_amd64.go.
const (
	groupRows   = 16
	tileTokens  = 8
	q1BlockSize = 288 // 32 words of 64 bits + 16 f16 scales, per 128 columns
)

func main() {
	for _, t := range []int{1, 2, 4, 8} {
		q1_0Kernel(t)
	}
	Generate()
}

// vpdpbusdBcst emits VPDPBUSD.BCST m32, u, acc: acc += Σ₄ u(u8)·m(s8) per
// lane, m a broadcast dword. avo v0.5.0's instruction table predates
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

// q1_0Kernel generates q1_0x16t<T>: 16 rows × T tokens of a Q1_0 product.
//
// For each 128-column block and each of its four 32-column sub-blocks k:
//
//	s[r] = −Σq_k + Σ_{g<8} Σ_{e<4} 2·bit[r][4g+e]·q[4g+e]   (= Σ ±q, exact)
//	blk[r] += d_x[k] · float(s[r])
//
// then acc[r] += d_w[r] · blk[r]: llama.cpp's ggml_vec_dot_q1_0_q8_0 order.
func q1_0Kernel(T int) {
	TEXT(fmt.Sprintf("q1_0x16t%d", T), NOSPLIT,
		"func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int)")
	Doc(fmt.Sprintf("q1_0x16t%d computes 16 rows × %d tokens of a Q1_0 · Q8_0 product.", T, T))
	Pragma("noescape")
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	negq := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())

	twos32 := GP32()
	MOVL(U32(0x02020202), twos32)
	twos := ZMM()
	VPBROADCASTD(twos32, twos)

	acc := make([]reg.VecVirtual, T)
	blk := make([]reg.VecVirtual, T)
	s := make([]reg.VecVirtual, T)
	for t := range acc {
		acc[t], blk[t], s[t] = ZMM(), ZMM(), ZMM()
		VPXORD(acc[t], acc[t], acc[t])
	}

	Label("block")
	for k := 0; k < 4; k++ {
		for t := 0; t < T; t++ {
			VPBROADCASTD(Mem{Base: negq, Disp: 32*k + 4*t}, s[t])
		}
		for g := 0; g < 8; g++ {
			mask := K()
			KMOVQ(Mem{Base: w, Disp: 8 * (8*k + g)}, mask)
			u := ZMM()
			VMOVDQU8_Z(twos, mask, u)
			for t := 0; t < T; t++ {
				vpdpbusdBcst(Mem{Base: qs, Disp: 32*(8*k+g) + 4*t}, u, s[t])
			}
		}
		for t := 0; t < T; t++ {
			VCVTDQ2PS(s[t], s[t])
			if k == 0 {
				VMULPS_BCST(Mem{Base: dk, Disp: 32*k + 4*t}, s[t], blk[t])
			} else {
				VFMADD231PS_BCST(Mem{Base: dk, Disp: 32*k + 4*t}, s[t], blk[t])
			}
		}
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: 256}, dw)
	for t := 0; t < T; t++ {
		VFMADD231PS(blk[t], dw, acc[t])
	}
	ADDQ(U32(q1BlockSize), w)
	ADDQ(U32(32*32), qs)
	ADDQ(U32(4*32), negq)
	ADDQ(U32(4*32), dk)
	DECQ(blocks)
	JNZ(LabelRef("block"))

	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	for t := 0; t < T; t++ {
		VMOVUPS(acc[t], Mem{Base: y})
		if t+1 < T {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}
