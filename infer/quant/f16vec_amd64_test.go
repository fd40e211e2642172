package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestF16VectorsSIMDMatchPortable runs the attention helpers under every
// feature level this CPU has (AVX-512, AVX2) against the portable loops,
// which sum in the same order: the results must agree bit for bit. The
// lengths leave tails of every size past the kernels' chunks of 16 and 64
// and panels of 8 and 16 outputs; h ends where its last row does, so a
// kernel that reads past it or folds in a lane past a tail fails; the
// "tiny" values make products that round to −0 and ±0 accumulators, whose
// signs a wrong tail padding would change.
func TestF16VectorsSIMDMatchPortable(t *testing.T) {
	defer SetFeatures(FeaturesAll)
	levels := []Features{FeaturesAll}
	if cpuAVX2 && haveF16C {
		levels = append(levels, FeaturesAVX2)
	}
	type fn struct {
		name string
		run  func(x []float32, h []uint16, stride int, out []float32)
		// The dots read len(out) rows of len(x); the weighted sums take
		// len(x) weights and read len(x) rows of len(out) (lanesOut) or,
		// transposed, len(out) rows of len(x).
		transposed, lanesOut bool
	}
	fns := []fn{
		{name: "DotsF16", run: DotsF16},
		{name: "DotsF16Vec", run: DotsF16Vec},
		{name: "WeightedSumF16", run: WeightedSumF16, lanesOut: true},
		{name: "WeightedSumF16Vec", run: WeightedSumF16Vec, lanesOut: true},
		{name: "WeightedSumF16T", run: WeightedSumF16T, transposed: true},
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, scale := range []struct {
		name string
		p, h float64
	}{{"normal", 1, 1}, {"tiny", 1e-38, 1e-6}} {
		for _, f := range fns {
			for _, dim := range []int{8, 16, 24, 48, 64, 72, 128, 192} {
				for _, n := range []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 300} {
					// x has len(x) = dim for the dots and n for the
					// weighted sums; out the other.
					xn, outn := dim, n
					if f.lanesOut || f.transposed {
						xn, outn = n, dim
					}
					rows, rowLen := outn, xn
					if f.lanesOut {
						rows, rowLen = xn, outn
					}
					stride := rowLen + r.IntN(9)
					h := make([]uint16, (rows-1)*stride+rowLen)
					for i := range h {
						h[i] = F32ToF16(float32(r.NormFloat64() * scale.h))
					}
					x := make([]float32, xn)
					for i := range x {
						x[i] = float32(r.NormFloat64() * scale.p)
					}
					if err := SetFeatures(FeaturesPortable); err != nil {
						t.Fatal(err)
					}
					want := make([]float32, outn)
					f.run(x, h, stride, want)
					for _, level := range levels {
						if err := SetFeatures(level); err != nil {
							t.Fatal(err)
						}
						got := make([]float32, outn+1)
						got[outn] = -7
						f.run(x, h, stride, got[:outn])
						name := fmt.Sprintf("%s/%v/%s/dim=%d/n=%d", f.name, level, scale.name, dim, n)
						if got[outn] != -7 {
							t.Fatalf("%s: stored past out", name)
						}
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s: out[%d] = %v (%#x), portable %v (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		}
	}
}
