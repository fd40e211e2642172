package quant

import (
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"golang.org/x/sys/cpu"
)

// TestNEONKernels: every NEON kernel, with SDOT and without, gives the
// portable dot product's results bit for bit.
func TestNEONKernels(t *testing.T) {
	for typ := range isaTable {
		checkBitIdentical(t, typ, "neon", neonProductNeon)
		if cpu.ARM64.HasASIMDDP {
			checkBitIdentical(t, typ, "sdot", neonProductSdot)
		} else {
			t.Logf("%s: no SDOT on this CPU, its variant skipped", typ)
		}
	}
}

// TestNEONFeatures: SetFeatures(FeaturesPortable) turns the NEON kernels
// off for new matrices and FeaturesAll brings them back.
func TestNEONFeatures(t *testing.T) {
	defer SetFeatures(FeaturesAll)
	for _, tc := range []struct {
		f    Features
		neon bool
	}{{FeaturesPortable, false}, {FeaturesAll, true}} {
		if err := SetFeatures(tc.f); err != nil {
			t.Fatal(err)
		}
		if got := chooseKernel(gguf.Q8_0).product != nil; got != tc.neon {
			t.Fatalf("SetFeatures(%v): NEON Q8_0 kernel = %v, want %v (SIMD %q)", tc.f, got, tc.neon, SIMD())
		}
	}
}
