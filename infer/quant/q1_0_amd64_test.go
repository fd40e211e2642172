package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestQ1_0SIMDBitExact: the Q1_0 kernels, AVX-512 and AVX2 (which a CPU with
// AVX-512 never picks on its own), must give the portable dotQ1_0's bits,
// which are ggml's: partial 16-row groups (and halves), several column
// tiles for one and two tokens, odd token counts, and activations
// quantized for another Q8_0-type weight (tables built by the product).
func TestQ1_0SIMDBitExact(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2")
	}
	paths := []string{"avx2"}
	if haveVNNI {
		paths = append(paths, "avx512")
	}
	defer func(v bool) { haveVNNI = v }(haveVNNI)
	r := rand.New(rand.NewPCG(17, 18))
	for _, path := range paths {
		haveVNNI = path == "avx512"
		for _, shape := range []struct{ rows, cols, tokens int }{
			{16, 128, 1}, {5, 256, 5}, {37, 384, 13}, {64, 2048, 9}, {27, 1664, 2}, {48, 4096, 3}, {100, 768, 70},
		} {
			for _, actFor := range []gguf.Type{gguf.Q1_0, gguf.Q8_0} {
				name := fmt.Sprintf("%s/%dx%d/tokens=%d/act-%s", path, shape.rows, shape.cols, shape.tokens, actFor)
				m := randMatrix(t, r, gguf.Q1_0, shape.rows, shape.cols)
				k := chooseKernel(gguf.Q1_0)
				if k.product == nil {
					t.Fatalf("%s: no SIMD kernel", name)
				}
				useKernel(m, k)
				x := randVec(r, shape.cols*shape.tokens)
				p := NewPool(2)
				var a Activations
				if err := p.Quantize(&a, actFor, x, shape.cols, shape.tokens); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, shape.rows*shape.tokens)
				if err := p.MatMul(m, &a, got); err != nil {
					t.Fatal(err)
				}
				p.Close()
				want := make([]float32, len(got))
				portableKernel(m, &a, 0, shape.rows, 0, shape.tokens, want)
				// The kernel over all rows at once too: the pool may cut a
				// matrix into single groups, and a many-group call is what
				// large matrices get.
				whole := make([]float32, len(got))
				m.kernel(m, &a, 0, shape.rows, 0, shape.tokens, whole)
				for i := range whole {
					if math.Float32bits(whole[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s, one call: y[%d] (row %d, token %d) = %v, portable %v", name, i, i%shape.rows, i/shape.rows, whole[i], want[i])
					}
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: y[%d] (row %d, token %d) = %v, portable %v", name, i, i%shape.rows, i/shape.rows, got[i], want[i])
					}
				}
			}
		}
	}
}
