package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestF16Vectors checks DotsF16 and AxpysF16 (SIMD where the CPU has it)
// against float64 sums over odd and SIMD-sized lengths. f32 accumulation of
// n products is within n·2⁻²⁴·Σ|terms| of the exact sum.
func TestF16Vectors(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dim := range []int{5, 16, 48, 128, 256} {
		for _, n := range []int{1, 3, 37} {
			stride := dim + 8
			h := make([]uint16, n*stride)
			for i := range h {
				h[i] = F32ToF16(float32(r.NormFloat64()))
			}
			x := randVec(r, dim)
			out := make([]float32, n)
			DotsF16(x, h, stride, out)
			for tt := 0; tt < n; tt++ {
				var want, mag float64
				for d := 0; d < dim; d++ {
					p := float64(x[d]) * float64(F16ToF32(h[tt*stride+d]))
					want += p
					mag += math.Abs(p)
				}
				if math.Abs(float64(out[tt])-want) > float64(dim)*0x1p-24*mag+1e-30 {
					t.Fatalf("DotsF16 dim %d n %d row %d: %v, want %v", dim, n, tt, out[tt], want)
				}
			}

			a := randVec(r, n)
			y := randVec(r, dim)
			want, mag := make([]float64, dim), make([]float64, dim)
			for d := range want {
				want[d], mag[d] = float64(y[d]), math.Abs(float64(y[d]))
				for tt := 0; tt < n; tt++ {
					p := float64(a[tt]) * float64(F16ToF32(h[tt*stride+d]))
					want[d] += p
					mag[d] += math.Abs(p)
				}
			}
			AxpysF16(a, h, stride, y)
			for d := range y {
				if math.Abs(float64(y[d])-want[d]) > float64(n+1)*0x1p-24*mag[d]+1e-30 {
					t.Fatalf("AxpysF16 dim %d n %d col %d: %v, want %v", dim, n, d, y[d], want[d])
				}
			}
		}
	}
}

func TestF16VectorsEmpty(t *testing.T) {
	out := []float32{7}
	DotsF16(nil, nil, 0, out)
	if out[0] != 0 {
		t.Errorf("empty dot = %v", out[0])
	}
	AxpysF16(nil, nil, 0, out) // no rows: no change, no panic
}
