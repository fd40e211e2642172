#include "textflag.h"

// Encodings the Go assembler lacks (Vd = d, Vn = n, Vm = m):
#define SADDLP_8H(n, d) WORD $(0x4E202800 | (n)<<5 | (d))
#define SADDLP_4S(n, d) WORD $(0x4E602800 | (n)<<5 | (d))
#define SCVTF_4S(n, d) WORD $(0x4E21D800 | (n)<<5 | (d))
#define FADD_4S(m, n, d) WORD $(0x4E20D400 | (m)<<16 | (n)<<5 | (d))
#define FMUL_4S(m, n, d) WORD $(0x6E20DC00 | (m)<<16 | (n)<<5 | (d))
#define FCVT_SH(n, d) WORD $(0x1EE24000 | (n)<<5 | (d))

DATA q1neonidx<>+0(SB)/8, $0x0000000000000000
DATA q1neonidx<>+8(SB)/8, $0x0101010101010101
DATA q1neonidx<>+16(SB)/8, $0x0202020202020202
DATA q1neonidx<>+24(SB)/8, $0x0303030303030303
DATA q1neonidx<>+32(SB)/8, $0x8040201008040201
DATA q1neonidx<>+40(SB)/8, $0x8040201008040201
GLOBL q1neonidx<>(SB), RODATA|NOPTR, $48

// Q1SUB does one sub-block: V1 holds its 4 weight bytes at bytes 0–3, R4
// points at its Q8_0 block. It leaves the lane sums s (ggml's lanes 0–3 in
// V8, 4–7 in V9) as floats, exact, and d_x broadcast in V16: the bits
// become byte masks (0xff where the weight is −1) by TBL, AND and CMEQ,
// (q ^ m) − m negates those q, and two pairwise widening adds sum each
// lane's 4 bytes.
#define Q1SUB \
	VTBL V28.B16, [V1.B16], V4.B16; \
	VTBL V29.B16, [V1.B16], V5.B16; \
	VAND V30.B16, V4.B16, V4.B16; \
	VAND V30.B16, V5.B16, V5.B16; \
	VCMEQ V31.B16, V4.B16, V4.B16; \
	VCMEQ V31.B16, V5.B16, V5.B16; \
	ADD $2, R4, R6; \
	VLD1 (R6), [V2.B16, V3.B16]; \
	VEOR V4.B16, V2.B16, V2.B16; \
	VEOR V5.B16, V3.B16, V3.B16; \
	VSUB V4.B16, V2.B16, V2.B16; \
	VSUB V5.B16, V3.B16, V3.B16; \
	SADDLP_8H(2, 6); \
	SADDLP_8H(3, 7); \
	SADDLP_4S(6, 8); \
	SADDLP_4S(7, 9); \
	SCVTF_4S(8, 8); \
	SCVTF_4S(9, 9); \
	MOVHU (R4), R7; \
	VMOV R7, V16.H[0]; \
	FCVT_SH(16, 16); \
	VDUP V16.S[0], V16.S4

// func q1_0DotNEON(blocks int, w *byte, x *byte) float32
TEXT ·q1_0DotNEON(SB), NOSPLIT, $0-28
	MOVD blocks+0(FP), R0
	MOVD w+8(FP), R1
	MOVD x+16(FP), R2
	MOVD $q1neonidx<>(SB), R3
	// V28 = bytes 0×8, 1×8 and V29 = 2×8, 3×8 (TBL indices), V30 = 1 << (j%8)
	VLD1 (R3), [V28.B16, V29.B16, V30.B16]
	VEOR V31.B16, V31.B16, V31.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	CBZ R0, done

block:
	ADD $2, R1, R6
	VLD1 (R6), [V0.B16]
	MOVD R2, R4
	// k = 0: blk = d_x·s
	VMOV V0.B16, V1.B16
	Q1SUB
	FMUL_4S(16, 8, 12)
	FMUL_4S(16, 9, 13)
	// k = 1…3: blk = fma(d_x, s, blk)
	VEXT $4, V0.B16, V0.B16, V1.B16
	ADD $34, R4, R4
	Q1SUB
	VFMLA V16.S4, V8.S4, V12.S4
	VFMLA V16.S4, V9.S4, V13.S4
	VEXT $8, V0.B16, V0.B16, V1.B16
	ADD $34, R4, R4
	Q1SUB
	VFMLA V16.S4, V8.S4, V12.S4
	VFMLA V16.S4, V9.S4, V13.S4
	VEXT $12, V0.B16, V0.B16, V1.B16
	ADD $34, R4, R4
	Q1SUB
	VFMLA V16.S4, V8.S4, V12.S4
	VFMLA V16.S4, V9.S4, V13.S4
	// acc = fma(d_w, blk, acc)
	MOVHU (R1), R7
	VMOV R7, V17.H[0]
	FCVT_SH(17, 17)
	VDUP V17.S[0], V17.S4
	VFMLA V17.S4, V12.S4, V14.S4
	VFMLA V17.S4, V13.S4, V15.S4
	ADD $18, R1, R1
	ADD $136, R2, R2
	SUB $1, R0, R0
	CBNZ R0, block

done:
	// ((a4+a0) + (a6+a2)) + ((a5+a1) + (a7+a3))
	FADD_4S(15, 14, 8)
	VEXT $8, V8.B16, V8.B16, V9.B16
	FADD_4S(9, 8, 8)
	VEXT $4, V8.B16, V8.B16, V9.B16
	FADD_4S(9, 8, 8)
	FMOVS F8, ret+24(FP)
	RET
