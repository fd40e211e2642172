package infer

import (
	"math"
	"testing"
)

// TestSinCosfMatchesGlibc checks sinf and cosf against glibc's (2.35, FMA
// build, as the prebuilt llama.cpp calls them) at RoPE angles where glibc's
// result is not math.Sin/Cos rounded to f32, over both range reductions
// (|θ| ≤ 120 and above). The angles are pos·θ_scale^i for theta 1e6 and
// head dim 128.
func TestSinCosfMatchesGlibc(t *testing.T) {
	cases := []struct{ theta, sin, cos uint32 }{
		{0x00000000, 0x00000000, 0x3f800000}, // 0
		{0x3eb21971, 0x3eae8786, 0x3f70aae5}, // 11·θ^16
		{0x3dd65f97, 0x3dd5fb6e, 0x3f7e994c}, // 15·θ^23
		{0x3e900903, 0x3e8e2494, 0x3f75efca}, // 17·θ^19
		{0x3faab0cb, 0x3f78d3ce, 0x3e70b27c}, // 100·θ^20
		{0x41a94aca, 0x3f3cd8b9, 0xbf2cd687}, // 119·θ^8
		{0x414bdd17, 0x3e3264df, 0x3f7c15d3}, // 500·θ^17
		{0x43017ec6, 0xbf22ef8d, 0xbf457423}, // 4095·θ^16 (> 120)
		{0x42ef501d, 0x3e8b8014, 0x3f76508e}, // 32767·θ^26
		{0x46caee87, 0x3f0b5a68, 0x3f56bf7c}, // 40000·θ^29 (> 120)
	}
	differs := 0
	for _, c := range cases {
		x := math.Float32frombits(c.theta)
		if got := math.Float32bits(sinf(x)); got != c.sin {
			t.Errorf("sinf(%v) = %#08x, glibc %#08x", x, got, c.sin)
		}
		if got := math.Float32bits(cosf(x)); got != c.cos {
			t.Errorf("cosf(%v) = %#08x, glibc %#08x", x, got, c.cos)
		}
		if float32(math.Sin(float64(x))) != math.Float32frombits(c.sin) || float32(math.Cos(float64(x))) != math.Float32frombits(c.cos) {
			differs++
		}
	}
	if differs < len(cases)-1 { // all but θ = 0 are where glibc is not correctly rounded
		t.Errorf("only %d cases differ from math.Sin/Cos: the table no longer tests what it should", differs)
	}
}
