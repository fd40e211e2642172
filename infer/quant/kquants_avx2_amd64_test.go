package quant

import "testing"

// TestAVX2KQuants: the AVX2 K-quant kernels give the portable dot
// product's results bit for bit.
func TestAVX2KQuants(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("no AVX2 and FMA on this CPU")
	}
	for typ := range avx2KTypes {
		checkBitIdentical(t, typ, "avx2", kquantsAVX2Product)
	}
}
