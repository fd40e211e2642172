package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestF16Vectors checks DotsF16 and WeightedSumF16 (AVX-512 where the CPU
// has it) against a direct transcription of the lane order (the AVX-512
// kernels must match it to the last bit but for the reference's rare double
// rounding, so the tolerance is 2 ulps of the largest partial sum) and
// against float64 sums (n·2⁻²⁴·Σ|terms|).
func TestF16Vectors(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, dim := range []int{5, 16, 48, 128, 256} {
		for _, n := range []int{1, 3, 16, 37} {
			stride := dim + 8
			h := make([]uint16, n*stride)
			for i := range h {
				h[i] = F32ToF16(float32(r.NormFloat64()))
			}
			x := randVec(r, dim)
			out := make([]float32, n)
			DotsF16(x, h, stride, out)
			for tt := 0; tt < n; tt++ {
				var lanes [16]float32
				var want, mag float64
				for d := 0; d < dim; d++ {
					v := F16ToF32(h[tt*stride+d])
					lanes[d%16] = fma32(x[d], v, lanes[d%16])
					want += float64(x[d]) * float64(v)
					mag += math.Abs(float64(x[d]) * float64(v))
				}
				checkSum(t, "DotsF16", dim, n, tt, out[tt], Reduce16(&lanes), want, mag, dim)
			}

			p := randVec(r, n)
			ws := make([]float32, dim)
			WeightedSumF16(p, h, stride, ws)
			for d := 0; d < dim; d++ {
				var lanes [16]float32
				var want, mag float64
				for tt := 0; tt < n; tt++ {
					v := F16ToF32(h[tt*stride+d])
					lanes[tt%16] = fma32(p[tt], v, lanes[tt%16])
					want += float64(p[tt]) * float64(v)
					mag += math.Abs(float64(p[tt]) * float64(v))
				}
				checkSum(t, "WeightedSumF16", dim, n, d, ws[d], Reduce16(&lanes), want, mag, n)
			}
		}
	}
}

func checkSum(t *testing.T, name string, dim, n, i int, got, lanes float32, exact, mag float64, terms int) {
	t.Helper()
	if math.Abs(float64(got-lanes)) > 2*0x1p-24*mag {
		t.Fatalf("%s dim %d n %d [%d] = %v, lane order gives %v", name, dim, n, i, got, lanes)
	}
	if math.Abs(float64(got)-exact) > float64(terms)*0x1p-24*mag {
		t.Fatalf("%s dim %d n %d [%d] = %v, exact %v", name, dim, n, i, got, exact)
	}
}

func TestF16VectorsEmpty(t *testing.T) {
	out := []float32{7}
	WeightedSumF16(nil, nil, 0, out)
	if out[0] != 0 {
		t.Errorf("empty weighted sum = %v", out[0])
	}
	DotsF16([]float32{1}, nil, 0, nil) // no rows: nothing to do, no panic
}

// TestF16VectorsVec checks DotsF16Vec and WeightedSumF16Vec (AVX-512 where
// the CPU has it) against the portable transcription of
// ggml_vec_dot_f16's order to the bit, and against float64 sums; and that
// this order is not tinyBLAS's (some results differ), so that a decode
// step cannot silently take the other one.
func TestF16VectorsVec(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	differ := 0
	for _, dim := range []int{64, 80, 128, 256} {
		for _, n := range []int{1, 2, 3, 37, 64, 300} {
			stride := dim + 8
			h := make([]uint16, n*stride)
			for i := range h {
				h[i] = F32ToF16(float32(r.NormFloat64()))
			}
			x := randVec(r, dim)
			got, want, tiny := make([]float32, n), make([]float32, n), make([]float32, n)
			DotsF16Vec(x, h, stride, got)
			dotsF16VecGo(x, h, stride, want)
			DotsF16(x, h, stride, tiny)
			for i := range got {
				var exact, mag float64
				for d := 0; d < dim; d++ {
					v := float64(x[d]) * float64(F16ToF32(h[i*stride+d]))
					exact, mag = exact+v, mag+math.Abs(v)
				}
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Abs(float64(got[i])-exact) > float64(dim)*0x1p-24*mag {
					t.Fatalf("DotsF16Vec dim %d n %d [%d] = %v, portable %v, exact %v", dim, n, i, got[i], want[i], exact)
				}
				if got[i] != tiny[i] {
					differ++
				}
			}

			p := randVec(r, n)
			ws, wsWant, wsTiny := make([]float32, dim), make([]float32, dim), make([]float32, dim)
			WeightedSumF16Vec(p, h, stride, ws)
			weightedSumF16VecGo(p, h, stride, wsWant)
			WeightedSumF16(p, h, stride, wsTiny)
			for d := range ws {
				var exact, mag float64
				for i := 0; i < n; i++ {
					v := float64(p[i]) * float64(F16ToF32(h[i*stride+d]))
					exact, mag = exact+v, mag+math.Abs(v)
				}
				if math.Float32bits(ws[d]) != math.Float32bits(wsWant[d]) || math.Abs(float64(ws[d])-exact) > float64(n)*0x1p-24*mag {
					t.Fatalf("WeightedSumF16Vec dim %d n %d [%d] = %v, portable %v, exact %v", dim, n, d, ws[d], wsWant[d], exact)
				}
				if ws[d] != wsTiny[d] {
					differ++
				}
			}
		}
	}
	if differ == 0 {
		t.Fatal("ggml_vec_dot_f16's order gave tinyBLAS's results everywhere: the test cannot tell them apart")
	}
}

// WeightedSumF16T over V stored by dimension gives WeightedSumF16's bits
// over V stored by position, for every tail length, with the AVX-512
// kernel and with the portable loop. h ends where the last row's last
// position does: the portable loop's bounds checks catch a read past it,
// and the kernel's masked tail must not fold one in.
func TestWeightedSumF16Transposed(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, features := range []Features{FeaturesAll, FeaturesPortable} {
		if err := SetFeatures(features); err != nil {
			t.Fatal(err)
		}
		for _, dim := range []int{1, 3, 4, 5, 64, 128} {
			for _, n := range []int{1, 2, 15, 16, 17, 31, 37, 100} {
				stride, strideT := dim+3, n+5
				h := make([]uint16, n*stride)
				hT := make([]uint16, (dim-1)*strideT+n)
				for tt := range n {
					for d := range dim {
						v := F32ToF16(float32(r.NormFloat64()))
						h[tt*stride+d], hT[d*strideT+tt] = v, v
					}
				}
				p := randVec(r, n)
				want, got := make([]float32, dim), make([]float32, dim)
				WeightedSumF16(p, h, stride, want)
				WeightedSumF16T(p, hT, strideT, got)
				for d := range dim {
					if math.Float32bits(got[d]) != math.Float32bits(want[d]) {
						t.Fatalf("features %v, dim %d, n %d: out[%d] = %v, by position %v", features, dim, n, d, got[d], want[d])
					}
				}
			}
		}
	}
	if err := SetFeatures(FeaturesAll); err != nil {
		t.Fatal(err)
	}
}
