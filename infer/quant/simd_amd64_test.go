package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestSIMDMatchesPortable runs every SIMD kernel against the portable one
// on random inputs: row counts that are not multiples of the 16-row groups,
// token counts that are not multiples of the 8-token tiles, and several
// thread counts.
func TestSIMDMatchesPortable(t *testing.T) {
	if !haveVNNI {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q2_0G128, gguf.Q4_0, gguf.Q8_0} {
		for _, shape := range []struct{ rows, cols, tokens int }{
			{16, 128, 1}, {5, 256, 3}, {33, 384, 1}, {100, 1024, 13}, {48, 2048, 70},
		} {
			m := randMatrix(t, r, typ, shape.rows, shape.cols)
			if m.packed == nil {
				t.Fatalf("%s: no SIMD kernel", typ)
			}
			x := randVec(r, shape.cols*shape.tokens)
			p := NewPool(2)
			var a Activations
			if err := p.Quantize(&a, typ, x, shape.cols, shape.tokens); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, shape.rows*shape.tokens)
			if err := p.MatMul(m, &a, got); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(got))
			portableKernel(m, &a, 0, shape.rows, 0, shape.tokens, want)
			for i := range got {
				if !closeTo(got[i], want[i], shape.cols) {
					t.Fatalf("%s %v: y[%d] = %v, portable %v", typ, shape, i, got[i], want[i])
				}
			}
			p.Close()
		}
	}
}
