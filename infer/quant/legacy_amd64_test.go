package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestLegacyKernelsExact: the Q4_1, Q5_0 and Q5_1 kernels sum in ggml's
// order (eight lanes per row, asm/legacy.go), as the portable dot products
// do, so every product must equal the portable one to the bit: AVX-512
// and AVX2, row counts that end in a partial group or half, token counts
// that end in a single token of a pair, random bytes (all codes, NaN-free
// scales) as well as quantized rows.
func TestLegacyKernelsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, typ := range []gguf.Type{gguf.Q4_1, gguf.Q5_0, gguf.Q5_1} {
		for _, level := range []string{"vnni", "avx2"} {
			k := isaTable[typ].vnni
			if level == "avx2" {
				k = isaTable[typ].avx2
			}
			if level == "vnni" && !haveVNNI || level == "avx2" && (!haveAVX2 || k.product == nil) {
				continue
			}
			for _, shape := range []struct{ rows, cols, tokens int }{
				{16, 32, 1}, {5, 256, 3}, {37, 512, 2}, {27, 2048, 9}, {64, 1024, 16},
			} {
				name := fmt.Sprintf("%s/%s/%dx%d/tokens=%d", typ, level, shape.rows, shape.cols, shape.tokens)
				m := randMatrix(t, r, typ, shape.rows, shape.cols)
				if shape.rows == 37 {
					m = randMatrixFast(t, r, typ, shape.rows, shape.cols)
				}
				useKernel(m, k)
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
				p.Close()
				want := make([]float32, len(got))
				portableKernel(m, &a, 0, shape.rows, 0, shape.tokens, want)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: y[%d] = %v, portable %v", name, i, got[i], want[i])
					}
				}
			}
		}
	}
}
