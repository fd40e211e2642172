package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

// gelu is ggml's table GELU: exact at its cut-offs, and elsewhere the tanh
// GELU of x rounded to f16, rounded to f16 (within an f16 step of the
// formula for |x| ≥ 2⁻¹⁴, where f16 is normal).
func TestGELU(t *testing.T) {
	formula := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*x*(1+0.044715*x*x)))
	}
	for _, tc := range []struct {
		x     float32
		want  float32
		exact bool
	}{
		{-10, 0, true}, {-25, 0, true}, {10, 10, true}, {123.5, 123.5, true}, {0, 0, true},
		{1, float32(formula(1)), false}, {-1, float32(formula(-1)), false}, {0.3, float32(formula(0.3)), false},
		{-3.7, float32(formula(-3.7)), false}, {9.99, float32(formula(9.99)), false},
	} {
		got := gelu(tc.x)
		tol := 0.0
		if !tc.exact {
			// x's f16 rounding moves the result by at most gelu' ≤ 1.13
			// times its step, and the result's own rounding by one more.
			tol = 2.2 * math.Abs(float64(tc.want)) / 2048
			tol = math.Max(tol, 2.2*math.Abs(float64(tc.x))/2048)
		}
		if d := math.Abs(float64(got - tc.want)); d > tol {
			t.Errorf("gelu(%v) = %v, want %v within %.3g", tc.x, got, tc.want, tol)
		}
	}
}

// TestGateGELUThreads: Gate with GELU splits the rows' elements across the
// threads; every split must give x·gelu(g) element by element, the gate
// overwritten in place included (as Gemma's FFN calls it).
func TestGateGELUThreads(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		b := newTestBackend(t, threads)
		rng := rand.New(rand.NewPCG(7, uint64(threads)))
		// 3 rows of 5000: shares of addBlock end mid-row.
		x := randTensor(t, b, rng, "x", 3, 5000, 4)
		g := randTensor(t, b, rng, "g", 3, 5000, 4)
		want := make([]float32, len(x.data))
		for i := range want {
			want[i] = x.data[i] * gelu(g.data[i])
		}
		pass(t, b, 3, 0, func() { b.Gate(g, x, g, infer.ActGELU) })
		for i := range want {
			if math.Float32bits(g.data[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%d threads: element %d = %v, want %v", threads, i, g.data[i], want[i])
			}
		}
	}
}
