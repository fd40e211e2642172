package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// FirstAbove and FirstNotAtMost agree with the loops they replace for
// every start, on lengths around the 16-wide blocks, with NaNs, ±Inf and
// ties at the threshold, under each kernel family.
func TestScans(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	nan := float32(math.NaN())
	for _, features := range []Features{FeaturesAll, FeaturesPortable} {
		if err := SetFeatures(features); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 15, 16, 17, 33, 100} {
			for trial := range 20 {
				x := make([]float32, n)
				for i := range x {
					switch r.IntN(12) {
					case 0:
						x[i] = nan
					case 1:
						x[i] = float32(math.Inf(1 - 2*r.IntN(2)))
					case 2:
						x[i] = 0.5 // the threshold itself
					default:
						x[i] = float32(r.NormFloat64()) - 2
					}
				}
				thr := float32(0.5)
				if trial%5 == 0 {
					thr = nan
				}
				for from := -1; from <= n+1; from++ {
					wantGT, wantNLE := n, n
					for i := max(from, 0); i < n; i++ {
						if x[i] > thr && wantGT == n {
							wantGT = i
						}
						if !(x[i] <= thr) && wantNLE == n {
							wantNLE = i
						}
					}
					if got := FirstAbove(x, from, thr); got != wantGT {
						t.Fatalf("%v n %d from %d thr %v: FirstAbove %d, want %d (%v)", features, n, from, thr, got, wantGT, x)
					}
					if got := FirstNotAtMost(x, from, thr); got != wantNLE {
						t.Fatalf("%v n %d from %d thr %v: FirstNotAtMost %d, want %d (%v)", features, n, from, thr, got, wantNLE, x)
					}
				}
			}
		}
	}
	if err := SetFeatures(FeaturesAll); err != nil {
		t.Fatal(err)
	}
}
