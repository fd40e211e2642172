package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestQ5_0SIMDBitExact: the AVX-512 Q5_0 kernels keep llama.cpp's eight
// lanes (dotQ5_0), so they must agree with the portable dot to the bit, for
// every token-count kernel and partial row groups.
func TestQ5_0SIMDBitExact(t *testing.T) {
	if !haveVNNI {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 0))
	for _, shape := range []struct{ rows, cols, tokens int }{
		{16, 32, 1}, {5, 64, 3}, {33, 1152, 1}, {40, 1152, 15}, {17, 6912, 9},
	} {
		m := randMatrix(t, r, gguf.Q5_0, shape.rows, shape.cols)
		if m.packed == nil {
			t.Fatal("no Q5_0 SIMD kernel")
		}
		x := randVec(r, shape.cols*shape.tokens)
		p := NewPool(2)
		var a Activations
		if err := p.Quantize(&a, gguf.Q5_0, x, shape.cols, shape.tokens); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, shape.rows*shape.tokens)
		if err := p.MatMul(m, &a, got); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(got))
		portableKernel(m, &a, 0, shape.rows, 0, shape.tokens, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: y[%d] = %v, portable %v", shape, i, got[i], want[i])
			}
		}
		p.Close()
	}
}
