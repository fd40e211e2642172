package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestQ1_0NEONBitExact: the NEON dot product must give dotQ1_0Go's bits
// (ggml's order) on random rows, one to many blocks.
func TestQ1_0NEONBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, cols := range []int{128, 256, 384, 2048, 6144} {
		m := randMatrix(t, r, gguf.Q1_0, 7, cols)
		x := randVec(r, cols)
		p := NewPool(1)
		var a Activations
		if err := p.Quantize(&a, gguf.Q1_0, x, cols, 1); err != nil {
			t.Fatal(err)
		}
		p.Close()
		for row := 0; row < m.Rows; row++ {
			got, want := dotQ1_0(cols, m.Row(row), a.Token(0)), dotQ1_0Go(cols, m.Row(row), a.Token(0))
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%d columns, row %d: NEON %v, Go %v", cols, row, got, want)
			}
		}
	}
}
