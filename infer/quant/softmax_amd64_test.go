package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The SIMD softmax must reproduce the lane-by-lane Go one bit for bit: both
// are llama.cpp's exact sequence of f32 roundings, so any difference is a
// bug, not rounding.
func TestSoftmaxF16SIMDMatchesGo(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name   string
		spread float64 // scores drawn from ±spread before scaling
	}{
		{"typical", 8},
		{"wide", 400}, // exp underflows: |n| > 192 lanes become 0
		{"flat", 1e-3},
	} {
		for n := 1; n <= 70; n++ {
			for _, size := range []int{n, n * 37} {
				s := make([]float32, size)
				for i := range s {
					s[i] = float32((r.Float64()*2 - 1) * tc.spread)
				}
				want := append([]float32(nil), s...)
				softmaxF16Go(want, 0.0883883)
				got := append([]float32(nil), s...)
				if !softmaxF16SIMD(got, 0.0883883) {
					t.Fatal("SIMD path refused")
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s n=%d: [%d] = %g (%#x), Go %g (%#x)", tc.name, size, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}
