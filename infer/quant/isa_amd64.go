package quant

import "github.com/bonsai-chat/bonsai/gguf"

// isaKernels is one weight type's amd64 kernels, one per instruction-set
// level, best first; a level left empty has none. choose takes the first
// level the CPU has under SetFeatures.
type isaKernels struct {
	// vnni: AVX-512 F, BW and VNNI (VPDPBUSD).
	vnni cpuKernel
	// avx512: AVX-512 F alone (the float kernels need no more).
	avx512 cpuKernel
	// avx2: AVX2 and FMA, as on most desktop x86.
	avx2 cpuKernel
}

// isaTable is the amd64 row of each type that has assembly here: which kernels
// run it at each level. A type missing here runs the portable dot product.
var isaTable = map[gguf.Type]isaKernels{
	gguf.Q1_0: {
		vnni: cpuKernel{q1_0Product, func(m *Matrix) []byte { return repack(m, layoutQ1_0) }},
		avx2: cpuKernel{q1_0AVX2Product, func(m *Matrix) []byte { return q1AVX2Nibbles(repack(m, layoutQ1_0)) }},
	},
	gguf.Q2_0: {
		vnni: x16(layoutQ2_0, q2_0x16t1, q2_0x16t2, q2_0x16t4, q2_0x16t8),
		avx2: avx2x16(layoutQ2_0, q2_0x16avx2t1, q2_0x8avx2t4, q2_0x8avx2t4),
	},
	gguf.Q2_0G128: q2_0G128Kernels,
	gguf.PQ2_0:    q2_0G128Kernels, // Q2_0G128's codec
	gguf.Q4_0: {
		vnni: x16(layoutQ4_0, q4_0x16t1, q4_0x16t2, q4_0x16t4, q4_0x16t8),
		avx2: avx2x16(layoutQ4_0, q4_0x16avx2t1, q4_0x8avx2t4, q4_0x8avx2t4),
	},
	// Q5_0 has AVX-512 kernels only: on AVX2 it runs the portable dot.
	gguf.Q5_0: {vnni: x16n(layoutQ5_0, q5_0x16t1, q5_0x16t2, q5_0x16t4, q5_0x16t8)},
	gguf.Q8_0: {
		vnni: x16(layoutQ8_0, q8_0x16t1, q8_0x16t2, q8_0x16t4, q8_0x16t8),
		avx2: avx2x16(layoutQ8_0, q8_0x16avx2t1, q8_0x8avx2t4, q8_0x8avx2t4),
	},
	gguf.PTQ1_0: {
		vnni: x16(layoutPTQ1_0, ptq1_0x16t1, ptq1_0x16t2, ptq1_0x16t4, ptq1_0x16t8),
		// Both halves of a group share PTQ1_0's tail bytes: a kernel each.
		avx2: avx2x16(layoutPTQ1_0, ptq1_0x16avx2t1, ptq1_0x8avx2t4h0, ptq1_0x8avx2t4h1),
	},
	gguf.Q4_K: {
		// llama.cpp's repacked Q4_K gemm rounds otherwise than its gemv:
		// the gemm tokens get kernels of their own.
		vnni: x16g(layoutQ4_K, [4]x16Kernel{q4_Kx16t1, q4_Kx16t2, q4_Kx16t4, q4_Kx16t8},
			[4]x16Kernel{q4_Kx16t1g, q4_Kx16t2g, q4_Kx16t4g, q4_Kx16t8g}),
		avx2: kquantsAVX2,
	},
	gguf.Q5_K: {
		vnni: x16(layoutQ5_K, q5_Kx16t1, q5_Kx16t2, q5_Kx16t4, q5_Kx16t8),
		avx2: kquantsAVX2,
	},
	gguf.Q6_K: {
		vnni: x16(layoutQ6_K, q6_Kx16t1, q6_Kx16t2, q6_Kx16t4, q6_Kx16t8),
		avx2: kquantsAVX2,
	},
	gguf.F32: {
		avx512: floats(&floatKernels{4, 4, 4, f32x4dot512, f32x4t4gemm512, f32x4t1gemm512}),
		avx2:   floatsF16C(&floatKernels{1, 2, 2, f32x1dotavx2, f32x2t2gemmavx2, f32x2t1gemmavx2}),
	},
	gguf.F16: {
		avx512: floats(&floatKernels{4, 4, 4, f16x4dot512, f16x4t4gemm512, f16x4t1gemm512}),
		avx2:   floatsF16C(&floatKernels{1, 2, 2, f16x1dotavx2, f16x2t2gemmavx2, f16x2t1gemmavx2}),
	},
	gguf.BF16: {
		avx512: floats(&floatKernels{4, 4, 4, bf16x4dot512, bf16x4t4gemm512, bf16x4t1gemm512}),
		avx2:   floatsF16C(&floatKernels{2, 2, 2, bf16x2dotavx2, bf16x2t2gemmavx2, bf16x2t1gemmavx2}),
	},
}

var q2_0G128Kernels = isaKernels{
	vnni: x16(layoutQ2_0G128, q2_0g128x16t1, q2_0g128x16t2, q2_0g128x16t4, q2_0g128x16t8),
	avx2: avx2x16(layoutQ2_0G128, q2_0g128x16avx2t1, q2_0g128x8avx2t4, q2_0g128x8avx2t4),
}

// kquantsAVX2 is the AVX2 K-quant kernels, which convert f16 with F16C
// and read the file's rows.
var kquantsAVX2 = withF16C(cpuKernel{product: kquantsAVX2Product})

func (k isaKernels) choose() cpuKernel {
	switch {
	case haveVNNI && k.vnni.product != nil:
		return k.vnni
	case haveAVX512 && k.avx512.product != nil:
		return k.avx512
	case haveAVX2 && k.avx2.product != nil:
		return k.avx2
	}
	return cpuKernel{}
}

// withF16C is k on a CPU with F16C, else no kernel.
func withF16C(k cpuKernel) cpuKernel {
	if !haveF16C {
		return cpuKernel{}
	}
	return k
}

// x16 is the AVX-512 kernels of one type over its packed layout l: 16
// rows × 1, 2, 4 or 8 tokens.
func x16(l *packedLayout, t1, t2, t4, t8 x16Kernel) cpuKernel {
	return x16g(l, [4]x16Kernel{t1, t2, t4, t8}, [4]x16Kernel{})
}

// x16n is x16 for kernels that read the neg16 plane (Q5_0's).
func x16n(l *packedLayout, t1, t2, t4, t8 x16Kernel) cpuKernel {
	ks := &kernelSet{layout: l, neg16: true, t: [4]x16Kernel{t1, t2, t4, t8}}
	return cpuKernel{
		product: func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
			simdProduct(ks, m, a, r0, r1, t0, t1, y)
		},
		repack: func(m *Matrix) []byte { return repack(m, l) },
	}
}

// x16g is x16 with other kernels g for the tokens that llama.cpp's
// repacked gemm computes (Matrix.gemmTokens).
func x16g(l *packedLayout, t, g [4]x16Kernel) cpuKernel {
	ks := &kernelSet{layout: l, t: t, g: g}
	return cpuKernel{
		product: func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
			simdProduct(ks, m, a, r0, r1, t0, t1, y)
		},
		repack: func(m *Matrix) []byte { return repack(m, l) },
	}
}

// avx2x16 is the AVX2 kernels of one type over the AVX-512 kernels'
// packed layout l: a 16-row group × 1 token, and 8-row half h × 4 tokens
// (x8t4h0, x8t4h1).
func avx2x16(l *packedLayout, x16t1, x8t4h0, x8t4h1 avx2Kernel) cpuKernel {
	ks := &avx2Kernels{layout: l, x16t1: x16t1, x8t4: [2]avx2Kernel{x8t4h0, x8t4h1}}
	return cpuKernel{
		product: func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
			avx2Product(ks, m, a, r0, r1, t0, t1, y)
		},
		repack: func(m *Matrix) []byte { return repack(m, l) },
	}
}

// floats is the float kernels ks, which read the file's rows.
func floats(ks *floatKernels) cpuKernel {
	return cpuKernel{product: func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
		floatProduct(ks, m, a, r0, r1, t0, t1, y)
	}}
}

// floatsF16C: the AVX2 float kernels convert f16 (and reach them through
// the same code) with F16C.
func floatsF16C(ks *floatKernels) cpuKernel { return withF16C(floats(ks)) }
