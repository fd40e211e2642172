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
