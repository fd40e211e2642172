package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLU compares SwiGLU (AVX-512 where available) with the one-lane
// transcription of ggml's algorithm (SiLU): within 1 ulp, and within 4 ulps
// of exact silu·up; special values (huge |x|, zero) follow ggml.
func TestSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	n := 16*40 + 7 // a libm tail too
	gate, up := make([]float32, n), make([]float32, n)
	for i := range gate {
		gate[i] = float32(r.NormFloat64() * 4)
		up[i] = float32(r.NormFloat64())
	}
	gate[0], gate[1], gate[2], gate[3] = 0, 200, -200, 88.7 // exp(−x) = 0, +Inf, overflow edge
	dst := make([]float32, n)
	SwiGLU(dst, gate, up)
	for i := range dst {
		var want float32
		if i < n/16*16 {
			want = SiLU(gate[i]) * up[i]
		} else {
			want = gate[i] / (1 + float32(math.Exp(float64(-gate[i])))) * up[i]
		}
		exact := float64(gate[i]) / (1 + math.Exp(-float64(gate[i]))) * float64(up[i])
		if ulps(dst[i], want) > 1 || math.Abs(float64(dst[i])-exact) > 4*ulp(exact) {
			t.Fatalf("SwiGLU(%v, %v) = %v, ggml transcription %v, exact %v", gate[i], up[i], dst[i], want, exact)
		}
	}
	if dst[1] != 200*up[1] || dst[2] != 0 {
		t.Errorf("SwiGLU(200) = %v, SwiGLU(−200) = %v", dst[1], dst[2])
	}
}

func ulps(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

func ulp(x float64) float64 {
	return math.Max(float64(math.Nextafter32(float32(math.Abs(x)), float32(math.Inf(1)))-float32(math.Abs(x))), 1e-45)
}
