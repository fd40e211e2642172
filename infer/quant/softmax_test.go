package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The SIMD f16 conversions against F32ToF16 on every kind of f32: normal,
// subnormal in f16, overflowing, ±0, ±Inf, NaN, and ties.
func TestF16ConversionsMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), 65504, 65520, 1e6, 6e-8, 3e-8, 1 + 0x1p-11, 1 + 3*0x1p-11}
	for len(src) < 1000 {
		switch len(src) % 3 {
		case 0:
			src = append(src, math.Float32frombits(r.Uint32()&^(0xff<<23)|uint32(100+r.IntN(60))<<23))
		case 1:
			src = append(src, float32(r.NormFloat64()))
		default:
			src = append(src, float32(r.NormFloat64()*1e-6))
		}
	}
	for n := 1; n <= len(src); n += 1 + n/8 {
		h := make([]uint16, n+1)
		F32sToF16(h, src[:n])
		f := make([]float32, n+1)
		RoundF16s(f, src[:n])
		for i, x := range src[:n] {
			if h[i] != F32ToF16(x) {
				t.Fatalf("n=%d: F32sToF16(%g) = %#x, want %#x", n, x, h[i], F32ToF16(x))
			}
			if math.Float32bits(f[i]) != math.Float32bits(RoundF16(x)) {
				t.Fatalf("n=%d: RoundF16s(%g) = %g, want %g", n, x, f[i], RoundF16(x))
			}
		}
		if h[n] != 0 || f[n] != 0 {
			t.Fatalf("n=%d: wrote past the end", n)
		}
	}
}
