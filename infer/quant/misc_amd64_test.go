package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRowHelpersSIMDMatchPortable runs SwiGLU, SoftmaxF16, the x86 Q8_0
// activation quantizer and the f16 conversions under every feature level
// this CPU has against the portable code, bit for bit, over lengths with
// every tail and inputs that reach exp's special ranges (2ⁿ below the
// normal range, |n| > 192, overflow), zero blocks and values that round
// to f16 subnormals and infinities.
func TestRowHelpersSIMDMatchPortable(t *testing.T) {
	defer SetFeatures(FeaturesAll)
	levels := []Features{FeaturesAll}
	if cpuAVX2 && haveF16C {
		levels = append(levels, FeaturesAVX2)
	}
	r := rand.New(rand.NewPCG(51, 52))
	special := []float32{0, float32(math.Copysign(0, -1)), 88.7, 89, -87.5, -100, -103.9, -104, 130, -130, 200, -200, 1e-40, 65519, 65520, 1e5, 6e-8, -3e-5}
	vec := func(n int, spread float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * spread)
			if r.IntN(8) == 0 {
				x[i] = special[r.IntN(len(special))]
			}
		}
		return x
	}
	type helper struct {
		name string
		run  func(x []float32) []uint32 // the result's bits
	}
	bits := func(f []float32) []uint32 {
		b := make([]uint32, len(f))
		for i, v := range f {
			b[i] = math.Float32bits(v)
		}
		return b
	}
	helpers := []helper{
		{"SwiGLU", func(x []float32) []uint32 {
			up := slices.Clone(x)
			slices.Reverse(up)
			dst := make([]float32, len(x))
			SwiGLU(dst, x, up)
			return bits(dst)
		}},
		{"SoftmaxF16", func(x []float32) []uint32 {
			s := slices.Clone(x)
			SoftmaxF16(s, 0.0883883)
			return bits(s)
		}},
		{"quantizeQ8_0X86", func(x []float32) []uint32 {
			x = x[:len(x)/qk8_0*qk8_0]
			if len(x) >= 2*qk8_0 {
				clear(x[qk8_0 : 2*qk8_0]) // an all-zero block
			}
			dst := make([]byte, len(x)/qk8_0*q8_0Bytes)
			quantizeQ8_0X86(x, dst)
			out := make([]uint32, len(dst))
			for i, b := range dst {
				out[i] = uint32(b)
			}
			return out
		}},
		{"F32sToF16", func(x []float32) []uint32 {
			dst := make([]uint16, len(x)+1)
			dst[len(x)] = 0x1234
			F32sToF16(dst[:len(x)], x)
			out := make([]uint32, len(dst))
			for i, h := range dst {
				out[i] = uint32(h)
			}
			return out
		}},
		{"RoundF16s", func(x []float32) []uint32 {
			dst := make([]float32, len(x)+1)
			dst[len(x)] = 7
			RoundF16s(dst[:len(x)], x)
			return bits(dst)
		}},
	}
	for _, h := range helpers {
		for _, spread := range []float64{1, 8, 400, 1e5} {
			for _, n := range []int{1, 5, 8, 15, 16, 17, 31, 32, 33, 64, 65, 100, 257, 1000} {
				x := vec(n, spread)
				if err := SetFeatures(FeaturesPortable); err != nil {
					t.Fatal(err)
				}
				want := h.run(slices.Clone(x))
				for _, level := range levels {
					if err := SetFeatures(level); err != nil {
						t.Fatal(err)
					}
					got := h.run(slices.Clone(x))
					name := fmt.Sprintf("%s/%v/spread=%g/n=%d", h.name, level, spread, n)
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%s: [%d] = %#x, portable %#x (input %v)", name, i, got[i], want[i], x[min(i, len(x)-1)])
						}
					}
				}
			}
		}
	}
}
