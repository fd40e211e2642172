package quant

import (
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestAVX2KQuants: the AVX2 K-quant kernels give the portable dot
// product's results bit for bit.
func TestAVX2KQuants(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("no AVX2 and FMA on this CPU")
	}
	for typ := range avx2KTypes {
		checkBitIdentical(t, typ, "avx2", kquantsAVX2Product)
	}
	// Q4_K's four-token gemm kernel: three groups of 4 and a gemv token.
	for _, cols := range []int{256, 2304} {
		checkBitIdenticalShape(t, gguf.Q4_K, "avx2", kquantsAVX2Product, 16, 13, cols)
	}
}
