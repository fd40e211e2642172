// Package quant holds the per-type tensor kernels of bonsai's CPU backend:
// dequantization, llama.cpp's reference quantizers, activation quantization
// and dot products, and the matrix products built on them.
//
// # Types
//
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q1_0,
// Q2_0 (ggml id 42,
// group 64), the legacy Prism Q2_0G128 layout, and the Prism fork's PQ2_0
// (the same codec under id 142) and PTQ1_0 (id 143, trits five to a byte).
// Q8_K and Q8_1 are activation types only. Supported reports whether a type has
// kernels here. Stock llama.cpp has no Prism types; their dot products
// (with Q8_0 activations) follow the float order stated in prism.go, which
// every kernel matches bit for bit.
//
// # Row functions
//
//	DequantizeRow(t, src, dst) error     // blocks → float32
//	QuantizeRow(t, src, dst) error       // float32 → blocks, quantize_row_*_ref
//	VecDotType(t) gguf.Type              // Q8_0 for Q1_0/Q2_0/Q4_0/Q5_0/Q8_0 and the Prism types, Q8_1 for Q4_1/Q5_1, Q8_K for K-quants, F16/BF16/F32 for themselves
//	ActivationBytes(t, n) (int, error)   // size of n activations quantized for weight type t
//	QuantizeActivations(t, x, dst)       // exactly as llama.cpp's x86 build (Q8_0: 127/amax, round half to even)
//	Dot(t, n, w, xq) float32             // one row · quantized activations, llama.cpp's arithmetic order
//	F16ToF32, F32ToF16, BF16ToF32, F32ToBF16
//
// Numerics follow ggml-cpu on x86 so logits match llama.cpp's within
// rounding: activations are quantized to the same integers with the same
// scales, integer sums are exact, and only the order of the final float
// multiply-adds differs.
//
// # Matrix products
//
// A Matrix wraps a GGUF weight tensor in place (rows × cols, ne0 = cols).
// Activations holds one or more tokens quantized for a weight type; it
// reuses its buffers, and one Activations can feed every matrix that reads
// the same input (q, k and v; gate and up). A Pool is a set of persistent
// worker goroutines (default: one per core) that split a product by rows and
// tiles of tokens:
//
//	pool := quant.NewPool(0)
//	defer pool.Close()
//	wq, err := quant.NewMatrix(info.Type, rows, cols, file.Data(info))
//	var a quant.Activations
//	err = pool.Quantize(&a, wq.Type, x, cols, tokens) // x: tokens × cols, row-major
//	err = pool.MatVec(wq, &a, y)                       // one token: y[r] = row r · x
//	err = pool.MatMul(wq, &a, y)                       // tokens: y[t·rows + r]
//
// MatVec and MatMul allocate nothing once the Activations buffers have grown
// to the largest batch. The Pool and Activations are for one goroutine at a
// time. Quantize once per input, not once per matrix: q, k and v (and gate
// and up) can share one Activations, and MatMuls runs such products in one
// dispatch (one wake-up of the workers instead of one per matrix):
//
//	err = pool.MatMuls([]quant.Product{{M: wq, Y: q}, {M: wk, Y: k}, {M: wv, Y: v}}, &a)
//
// Pool.Run(chunks, task) runs other row-parallel work (attention, SwiGLU) on
// the same workers, chunks claimed dynamically; task.RunChunk gets a worker
// index below Threads() for per-thread scratch space.
//
// # Attention helpers
//
// For attention over an f16 KV cache, in the operation order of llama.cpp's
// CPU attention without flash attention (16 lanes of FMAs, then the tree of
// _mm512_reduce_add_ps), AVX-512 or AVX2 (the 16 lanes as two YMMs, the
// same bits) where available:
//
//	DotsF16(q, kCache[off:], stride, scores)        // scores[t] = q · key t
//	WeightedSumF16(probs, vCache[off:], stride, out) // out = Σ_t probs[t]·value t
//	Reduce16(&lanes)                                 // the 16-lane tree
//
// That is tinyBLAS's order, which llama.cpp runs for two query tokens or
// more; a pass of one token goes through ggml_vec_dot_f16 instead (four
// 16-lane accumulators over chunks of 64): DotsF16Vec and
// WeightedSumF16Vec. GlibcExpf and GlibcLogf are glibc's expf and logf,
// which ggml's scalar unary ops call.
//
// SoftmaxF16(scores, scale) is the softmax between them (ggml_v_expf, sums
// per 16 lanes in f64, weights rounded to f16), F32sToF16 and RoundF16s the
// f16 roundings of K/V and q;
// and SwiGLU(dst, gate, up), silu(gate)·up as ggml_vec_swiglu_f32 computes
// it (ggml_v_expf on blocks of 16, libm expf on the tail): callers that
// split a row across threads should cut it at multiples of 16 to keep
// llama.cpp's rounding. These row helpers, too, have AVX-512 and AVX2
// versions that give the portable code's bits.
//
// # Kernels
//
// A type's kernels are one row of a table, as ggml's type_traits: its
// codec and portable dot products in traits.go's table, its assembly per
// instruction-set level in this architecture's isaTable (isa_amd64.go,
// isa_arm64.go). Adding a type takes gguf/types.go's block, the type's own
// files (codec, portable dot, packed layout, asm generator) and those rows.
//
// Each Matrix picks the fastest kernel the CPU supports when it is created
// (golang.org/x/sys/cpu): AVX-512 VNNI assembly generated with avo
// (infer/quant/asm, its own module; see the go:generate lines in
// simd_amd64.go, kquants_amd64.go and q1_0_amd64.go) for Q1_0, Q2_0, Q2_0G128, PQ2_0,
// PTQ1_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K, AVX2+FMA kernels for Q1_0, Q2_0,
// Q2_0G128, PQ2_0, PTQ1_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 on CPUs without AVX-512 (and AVX2 kernels of
// integer sums for Q4_K, Q5_K and Q6_K, asm/avx2k), AVX-512
// or AVX2 kernels for F32, F16 and BF16 (reading the file's rows); on
// arm64, NEON kernels (with SDOT where the CPU has the dot-product
// extension; asm/neon) for Q8_0, Q4_0, Q2_0, Q4_K, Q5_K and Q6_K; the
// portable Go kernels otherwise. The kernels of integer sums (sums.go)
// leave the float part to Go, in the portable order, so they match the
// portable kernels bit for bit. Float products follow llama.cpp's x86
// orders, which differ between one token (ggml_vec_dot_*) and more
// (tinyBLAS; for bf16 VDPBF16PS's order), so their matrix products pick
// the order by the batch (floats.go). The K-quant
// kernels take Q8_K activations with their block sums beside the quants.
// The SIMD kernels read a copy of the
// weights repacked at NewMatrix into groups of 16 rows (repack.go), with the
// same bits per weight (PTQ1_0's trits stay five to a byte), so one VPDPBUSD
// yields a partial sum for each of 16
// rows; a tile of up to 8 tokens shares each expanded weight register
// (prompt processing), and Q8_0 activations get an interleaved copy with
// −Σq and the scale per 32 (planes in simd_amd64.go). Q1_0's kernels
// instead look each 4-column group's partial product up in per-token
// tables (q1_0_amd64.go), which keeps ggml's eight-lane order at full
// speed; Q4_1, Q5_0 and Q5_1 keep that order too (ggml_vec_dot_q5_0_q8_0
// and its kin, and tinyBLAS's Q5_0 gemm), one accumulator per 4-column
// group, so their kernels (legacy_amd64.go) take 16 rows × 2 tokens at
// most and give the portable dot products' bits (the AVX2 ones read half of each table, the patterns' complements
// being their negations). SetFeatures caps the
// kernels at AVX2 (AVX-512 off) or at the portable ones, for comparisons;
// it is an explicit call, never read from the environment. Tests compare every SIMD kernel with
// the portable one on random inputs, odd sizes included. The kernels carry
// no timing code; the CPU backend's profiler times whole phases.
package quant
