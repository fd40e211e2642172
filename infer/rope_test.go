package infer

import (
	"math"
	"testing"
)

func TestRopeCorrDimsBonsai(t *testing.T) {
	// Bonsai 1.x: head_dim 128, theta 1e6, YaRN factor 4 over 16384.
	r := Rope{HeadDim: 128, Dims: 128, Base: 1e6, FreqScale: 0.25, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigContext: 16384}
	// 128·ln(16384/(32·2π))/(2·ln 1e6) = 20.38 → 20; with beta 1: 36.44 → 37.
	if got := r.CorrDims(); got != [2]float32{20, 37} {
		t.Fatalf("CorrDims = %v, want [20 37]", got)
	}
}

func TestRopeAngles(t *testing.T) {
	plain := Rope{HeadDim: 8, Dims: 8, Base: 10000, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	yarn := Rope{HeadDim: 128, Dims: 128, Base: 1e6, FreqScale: 0.25, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigContext: 16384}
	withFactors := plain
	withFactors.Factors = &FreqFactors{Values: []float32{1, 2.5, 8, 32}}
	mscale := 1 + 0.1*math.Log(4)
	tests := []struct {
		name string
		r    Rope
		pos  int
		// pairs is how many leading pairs to check.
		pairs int
		// want returns the expected angle and magnitude of pair j.
		want func(j int) (theta, scale float64)
	}{
		{"position 0 is identity", plain, 0, 4, func(int) (float64, float64) { return 0, 1 }},
		// ggml_rope_cache_init divides each pair's angle by its factor.
		{"frequency factors divide the angles", withFactors, 7, 4, func(j int) (float64, float64) {
			return 7 * math.Pow(10000, -2*float64(j)/8) / float64(withFactors.Factors.Values[j]), 1
		}},
		{"plain theta^(-2j/d)", plain, 7, 4, func(j int) (float64, float64) {
			return 7 * math.Pow(10000, -2*float64(j)/8), 1
		}},
		// Pairs below the ramp's start (20) keep their angle.
		{"yarn extrapolates fast pairs", yarn, 100, 21, func(j int) (float64, float64) {
			return 100 * math.Pow(1e6, -2*float64(j)/128), mscale
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.r.Dims / 2
			cos, sin := make([]float32, n), make([]float32, n)
			tc.r.Angles(tc.pos, cos, sin)
			for j := range tc.pairs {
				theta, scale := tc.want(j)
				if d := math.Abs(float64(cos[j]) - scale*math.Cos(theta)); d > 1e-5 {
					t.Errorf("pair %d: cos = %v, want %v", j, cos[j], scale*math.Cos(theta))
				}
				if d := math.Abs(float64(sin[j]) - scale*math.Sin(theta)); d > 1e-5 {
					t.Errorf("pair %d: sin = %v, want %v", j, sin[j], scale*math.Sin(theta))
				}
			}
		})
	}
}

func TestRopeYarnInterpolatesSlowPairs(t *testing.T) {
	r := Rope{HeadDim: 128, Dims: 128, Base: 1e6, FreqScale: 0.25, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigContext: 16384}
	cos, sin := make([]float32, 64), make([]float32, 64)
	r.Angles(1000, cos, sin)
	j := 50 // above the ramp: fully interpolated, angle × FreqScale
	theta := 0.25 * 1000 * math.Pow(1e6, -2*float64(j)/128)
	scale := 1 + 0.1*math.Log(4)
	got := math.Atan2(float64(sin[j]), float64(cos[j]))
	if math.Abs(got-theta) > 1e-4 {
		t.Errorf("pair %d angle = %v, want %v", j, got, theta)
	}
	if m := math.Hypot(float64(sin[j]), float64(cos[j])); math.Abs(m-scale) > 1e-5 {
		t.Errorf("pair %d magnitude = %v, want %v", j, m, scale)
	}
}
