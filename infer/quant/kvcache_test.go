package quant

import (
	"math/rand"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// DotQ8_0's SIMD loop gives the portable loop's bits, on rows quantized as
// the cache stores them and on extreme codes.
func TestDotQ8_0SIMDMatchesGo(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, n := range []int{32, 64, 128, 256} {
		x, y := make([]byte, n/32*34), make([]byte, n/32*34)
		for trial := range 200 {
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = float32(r.NormFloat64()*10), float32(r.NormFloat64())
				if trial%7 == 0 {
					a[i] = 1e4 * float32(r.Intn(3)-1)
				}
			}
			QuantizeActivations(gguf.Q8_0, a, x)
			QuantizeActivations(gguf.Q8_0, b, y)
			want := dotQ8_0Go(x, y)
			got, ok := dotQ8_0SIMD(x, y)
			if !ok {
				t.Skip("no AVX2 here")
			}
			if got != want {
				t.Fatalf("n %d trial %d: SIMD %v, Go %v", n, trial, got, want)
			}
		}
	}
}
