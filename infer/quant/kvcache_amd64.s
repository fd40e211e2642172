#include "textflag.h"

// func dotQ8_0AVX2(x, y *byte, blocks int) float32
// ggml_vec_dot_q8_0_q8_0's AVX2 loop: per block, the eight int32 sums of
// four int8 products (|x|·sign(y, x) by VPMADDUBSW, pairs by VPMADDWD),
// acc = fma(d_x·d_y, sums, acc); then hsum_float_8.
// Requires: AVX, AVX2, FMA, F16C
TEXT ·dotQ8_0AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ blocks+16(FP), CX
	VXORPS Y0, Y0, Y0
	MOVL $0x00010001, AX
	VMOVD AX, X7
	VPBROADCASTD X7, Y7

loop:
	MOVWLZX (SI), AX
	VMOVD AX, X1
	VCVTPH2PS X1, X1
	MOVWLZX (DI), AX
	VMOVD AX, X2
	VCVTPH2PS X2, X2
	VMULSS X2, X1, X1
	VBROADCASTSS X1, Y1
	VMOVDQU 2(SI), Y2
	VMOVDQU 2(DI), Y3
	VPSIGNB Y2, Y2, Y4
	VPSIGNB Y2, Y3, Y5
	VPMADDUBSW Y5, Y4, Y6
	VPMADDWD Y7, Y6, Y6
	VCVTDQ2PS Y6, Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ $34, SI
	ADDQ $34, DI
	DECQ CX
	JNZ loop

	VEXTRACTF128 $1, Y0, X1
	VADDPS X0, X1, X1
	VMOVHLPS X1, X1, X2
	VADDPS X2, X1, X1
	VMOVSHDUP X1, X2
	VADDSS X2, X1, X1
	VMOVSS X1, ret+24(FP)
	VZEROUPPER
	RET
