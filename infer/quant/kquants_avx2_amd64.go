package quant

//go:generate sh -c "cd asm && go run ./avx2k -out ../kquants_avx2_amd64.s"

import "github.com/bonsai-chat/bonsai/gguf"

// The AVX2 K-quant kernels, for x86 CPUs without AVX-512 (asm/avx2k):
// integer sums in assembly, the float part in sums.go, bit for bit the
// portable kernels'.

//go:noescape
func q4_KSumsAVX2(w, x *byte, blocks int, out *int32)

//go:noescape
func q5_KSumsAVX2(w, x *byte, blocks int, out *int32)

//go:noescape
func q6_KSumsAVX2(w, x *byte, blocks int, out *int32)

// avx2KTypes are the types kquantsAVX2Product runs.
var avx2KTypes = map[gguf.Type]bool{gguf.Q4_K: true, gguf.Q5_K: true, gguf.Q6_K: true}

// blockSums runs t's assembly over blocks super-blocks (v: unused on
// amd64, which has one variant).
func blockSums(t gguf.Type, _ bool, w, x *byte, blocks int, out *int32) {
	switch t {
	case gguf.Q4_K:
		q4_KSumsAVX2(w, x, blocks, out)
	case gguf.Q5_K:
		q5_KSumsAVX2(w, x, blocks, out)
	case gguf.Q6_K:
		q6_KSumsAVX2(w, x, blocks, out)
	}
}

// rowDot is one row · one token through the type's integer sums.
func rowDot(t gguf.Type, v bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	switch t {
	case gguf.Q4_K:
		return rowQ4_K(v, n, w, x, s)
	case gguf.Q5_K:
		return rowQ5_K(v, n, w, x, s)
	}
	return rowQ6_K(v, n, w, x, s)
}

// kquantsAVX2Product is the Matrix kernel of the AVX2 K-quants.
func kquantsAVX2Product(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	sumsProduct(false, m, a, r0, r1, t0, t1, y)
}
