package main

// Q5_0 × Q8_0 kernels, generated into q5_0_amd64.s:
//
//	cd asm && BONSAI_ASM_SET=q5_0 go run . -out ../q5_0_amd64.s -stubs ../q5_0_stub_amd64.go -pkg quant
//
// The packed block (16 rows × 32 columns, 352 bytes, layoutQ5_0 in
// q5_0_amd64.go):
//
//	  0  4 × 64 B  Q4_0's nibbles: byte 4r+e of chunk p = row r's low four
//	               bits of column 8p+e (low nibble) and 8p+4+e (high)
//	256  8 × 8 B   group g's fifth bits: bit 4r+e = row r, column 4g+e
//	320  [16]f16   d
//
// llama.cpp's x86 Q5_0 products (ggml_vec_dot_q5_0_q8_0 and tinyBLAS's
// gemm) keep eight f32 lanes per row and token, lane g the exact sum over
// the block's group g of four columns:
//
//	s_g   = −16·Σq + Σ u·q          exact (from the neg16 plane, VPDPBUSD)
//	acc_g = fma(float(s_g), d_w·d_x, acc_g)
//
// and hsum_float_8 at the end (storeLaneSums), which is dotQ5_0's
// arithmetic to the last bit.

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const (
	q5_0BlockBytes = 352
	q5_0High       = 256
	q5_0D          = 320
	// q5_0Prefetch is how far ahead (in packed blocks, ~5.5 KiB) the
	// kernels prefetch: past the 4 KiB page boundaries where the hardware
	// streamers stop.
	q5_0Prefetch = 16
)

// q5_0Main generates q5_0_amd64.s.
func q5_0Main() {
	for _, t := range []int{1, 2, 4, 8} {
		q5_0Kernel(t)
	}
	Generate()
}

// q5_0Kernel generates q5_0x16t<T>. Up to two tokens keep their eight
// lanes in registers; more keep them in the frame, as the Q6_K kernels do.
// Each lane's integer sum starts at −16·Σq of its group (the neg16 plane,
// passed as negq), so one VPDPBUSD per group and token finishes it.
func q5_0Kernel(T int) {
	name := fmt.Sprintf("q5_0x16t%d", T)
	inRegs := T <= 2
	var flags attr.Attribute
	if inRegs {
		flags = NOSPLIT
	}
	TEXT(name, flags, "func(w *byte, blocks int, qs *byte, negq *byte, dk *byte, y *float32, ldy int, rowMask uint16)")
	Doc(fmt.Sprintf("%s computes 16 rows × %d tokens of a q5_0 · Q8_0 product.", name, T))
	Pragma("noescape")
	var frame Mem
	if !inRegs {
		frame = AllocLocal(T * 8 * 64)
	}
	lane := func(t, l int) Mem { return frame.Offset(512*t + 64*l) }
	w := Load(Param("w"), GP64())
	blocks := Load(Param("blocks"), GP64())
	qs := Load(Param("qs"), GP64())
	neg := Load(Param("negq"), GP64())
	dk := Load(Param("dk"), GP64())
	m0f, m10 := broadcastByte(0x0f), broadcastByte(0x10)
	zero := ZMM()
	VPXORD(zero, zero, zero)
	regs := make([][8]reg.VecVirtual, T)
	for t := 0; t < T; t++ {
		for l := 0; l < 8; l++ {
			if inRegs {
				regs[t][l] = ZMM()
				VPXORD(zero, zero, regs[t][l])
			} else {
				VMOVUPS(zero, lane(t, l))
			}
		}
	}

	Label("block")
	for off := 0; off < q5_0BlockBytes; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: q5_0Prefetch*q5_0BlockBytes + off})
	}
	dw := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: q5_0D}, dw)
	d := make([]reg.VecVirtual, T)
	for t := range d {
		d[t] = ZMM()
		VMULPS_BCST(Mem{Base: dk, Disp: 4 * t}, dw, d[t])
	}
	for g := 0; g < 8; g++ {
		u := q5_0Expand(w, g, m0f, m10)
		for t := 0; t < T; t++ {
			s := ZMM()
			VPBROADCASTD(Mem{Base: neg, Disp: 32*g + 4*t}, s)
			vpdpbusdBcst(Mem{Base: qs, Disp: 32*g + 4*t}, u, s)
			VCVTDQ2PS(s, s)
			if inRegs {
				VFMADD231PS(s, d[t], regs[t][g])
				continue
			}
			a := ZMM()
			VMOVUPS(lane(t, g), a)
			VFMADD231PS(s, d[t], a)
			VMOVUPS(a, lane(t, g))
		}
	}
	ADDQ(U32(q5_0BlockBytes), w)
	ADDQ(U32(8*32), qs)  // 8 groups × 8 tokens × 4 bytes
	ADDQ(U32(8*32), neg) // as qs
	ADDQ(U32(32), dk)    // 8 tokens × 4 bytes
	DECQ(blocks)
	JNZ(LabelRef("block"))

	if !inRegs {
		storeLaneSums(T, lane, false)
		return
	}
	// storeLaneSums' tree, on the registers.
	y := Load(Param("y"), GP64())
	ldy := Load(Param("ldy"), GP64())
	mask := Load(Param("rowMask"), GP32())
	kstore := K()
	KMOVW(mask, kstore)
	for t := 0; t < T; t++ {
		a := regs[t]
		VADDPS(a[0], a[4], a[4])
		VADDPS(a[2], a[6], a[6])
		VADDPS(a[1], a[5], a[5])
		VADDPS(a[3], a[7], a[7])
		VADDPS(a[6], a[4], a[4])
		VADDPS(a[7], a[5], a[5])
		VADDPS(a[5], a[4], a[4])
		VMOVUPS(a[4], kstore, Mem{Base: y})
		if t+1 < T {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// q5_0Expand emits the 5-bit codes of group g (columns 4g…4g+3) of 16 rows:
// the nibble, plus 16 where the fifth bit (a ready byte mask) is set.
func q5_0Expand(w reg.Register, g int, m0f, m10 reg.VecVirtual) reg.VecVirtual {
	lo := Mem{Base: w, Disp: 64 * (g / 2)}
	u, k := ZMM(), K()
	KMOVQ(Mem{Base: w, Disp: q5_0High + 8*g}, k)
	if g%2 == 0 {
		VPANDD(lo, m0f, u)
	} else {
		VPSRLW(U8(4), lo, u)
		VPANDD(u, m0f, u)
	}
	VPADDB(m10, u, k, u)
	return u
}
