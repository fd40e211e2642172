package cpu

import (
	"math/rand/v2"
	"testing"
)

// TestDeltaTokenFused: the fused AVX-512 rows give the portable passes'
// bits.
func TestDeltaTokenFused(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{64, 128} {
		vec := func(n int, s float64) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(s * rng.NormFloat64())
			}
			return x
		}
		M, k, q, v := vec(d*d, 0.3), vec(d, 0.1), vec(d, 0.1), vec(d, 1)
		want, got := append([]float32(nil), M...), append([]float32(nil), M...)
		outWant, outGot := make([]float32, d), make([]float32, d)
		const decay, beta, scale = 0.9, 0.6, 0.125
		scaleF32(want, decay)
		delta := make([]float32, d)
		for c := range d {
			delta[c] = (v[c] - dotF32(want[c*d:(c+1)*d], k)) * beta
		}
		for c := range d {
			madF32(want[c*d:(c+1)*d], k, delta[c])
		}
		for c := range d {
			outWant[c] = dotF32(want[c*d:(c+1)*d], q) * scale
		}
		if !deltaToken(got, k, q, v, outGot, decay, beta, scale) {
			t.Fatalf("d=%d: the fused form did not run", d)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("d=%d: state[%d] = %v, passes give %v", d, i, got[i], want[i])
			}
		}
		for i := range outWant {
			if outGot[i] != outWant[i] {
				t.Fatalf("d=%d: out[%d] = %v, passes give %v", d, i, outGot[i], outWant[i])
			}
		}
	}
}
