#include "textflag.h"

// func dot64AVX512(x, y *float32, n int, out *[16]float32)
// ggml_vec_dot_f32's AVX-512 main loop over n (a positive multiple of 64)
// elements: four accumulators of 16 lanes, one FMA each per 64-element
// step, then added (0+2, 1+3, then the two) into out.
TEXT ·dot64AVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

dotloop:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	VMOVUPS 128(SI), Z6
	VMOVUPS 192(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JNZ  dotloop

	VADDPS Z2, Z0, Z0
	VADDPS Z3, Z1, Z1
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET

// func madAVX512(y, x *float32, n int, v float32)
// y[i] = fma(x[i], v, y[i]) for n (a positive multiple of 16) elements.
TEXT ·madAVX512(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS v+24(FP), Z1

madloop:
	VMOVUPS (DI), Z0
	VFMADD231PS (SI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  madloop
	VZEROUPPER
	RET

// func scaleAVX512(y *float32, n int, v float32)
// y[i] *= v for n (a positive multiple of 16) elements.
TEXT ·scaleAVX512(SB), NOSPLIT, $0-20
	MOVQ y+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Z1

scaleloop:
	VMULPS (DI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  scaleloop
	VZEROUPPER
	RET

// REDUCE adds Z0…Z3 as ggml_vec_dot_f32 does (0+2, 1+3, then the two) and
// reduces the 16 lanes into X0 as _mm512_reduce_add_ps: halves, quarters,
// then (0+2)+(1+3). Clobbers Z1.
#define REDUCE \
	VADDPS Z2, Z0, Z0; \
	VADDPS Z3, Z1, Z1; \
	VADDPS Z1, Z0, Z0; \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0

// func deltaRowsAVX512(m, k, q, v, out *float32, d int, decay, beta, scale float32)
// One token of the delta rule for one head, row by row of M = Sᵀ (d rows of
// d, d a positive multiple of 64): row *= decay; δ = (v_c − dot(row, k))·β;
// row += δ·k; out_c = dot(row, q)·scale. Each row only meets its own
// values, so this is ggml's order of whole-matrix passes, to the bit.
TEXT ·deltaRowsAVX512(SB), NOSPLIT, $0-60
	MOVQ m+0(FP), SI
	MOVQ k+8(FP), R8
	MOVQ q+16(FP), R9
	MOVQ v+24(FP), R10
	MOVQ out+32(FP), R11
	MOVQ d+40(FP), BX
	MOVQ BX, R12
	SHLQ $2, R12
	VBROADCASTSS decay+48(FP), Z8
	VMOVSS beta+52(FP), X9
	VMOVSS scale+56(FP), X10

deltarow:
	MOVQ d+40(FP), CX
	MOVQ SI, AX
	MOVQ R8, DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

deltadotk:
	VMULPS (AX), Z8, Z4
	VMULPS 64(AX), Z8, Z5
	VMULPS 128(AX), Z8, Z6
	VMULPS 192(AX), Z8, Z7
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	VMOVUPS Z6, 128(AX)
	VMOVUPS Z7, 192(AX)
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ $256, AX
	ADDQ $256, DI
	SUBQ $64, CX
	JNZ  deltadotk
	REDUCE

	VMOVSS (R10), X1
	VSUBSS X0, X1, X1
	VMULSS X9, X1, X1
	VBROADCASTSS X1, Z11

	MOVQ d+40(FP), CX
	MOVQ SI, AX
	MOVQ R8, DI

deltamad:
	VMOVUPS (AX), Z4
	VFMADD231PS (DI), Z11, Z4
	VMOVUPS Z4, (AX)
	ADDQ $64, AX
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ  deltamad

	MOVQ d+40(FP), CX
	MOVQ SI, AX
	MOVQ R9, DI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

deltadotq:
	VMOVUPS (AX), Z4
	VMOVUPS 64(AX), Z5
	VMOVUPS 128(AX), Z6
	VMOVUPS 192(AX), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ $256, AX
	ADDQ $256, DI
	SUBQ $64, CX
	JNZ  deltadotq
	REDUCE

	VMULSS X10, X0, X0
	VMOVSS X0, (R11)

	ADDQ R12, SI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ BX
	JNZ  deltarow
	VZEROUPPER
	RET
