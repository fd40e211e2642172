package cpu

import (
	"math"
	"math/big"
	"testing"
)

// expf must stay within a few ulps of exp over softmax's and SiLU's range,
// and saturate like ggml's outside it.
func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x < 88; x += 0.0137 {
		got, want := float64(expf(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
		worst = max(worst, math.Abs(got-want)/ulp)
	}
	if worst > 4 {
		t.Errorf("expf is off by up to %.1f ulps", worst)
	}
	for _, tc := range []struct{ x, want float32 }{
		{0, 1},
		{float32(math.Inf(-1)), 0},
		{-200, 0},
		{200, float32(math.Inf(1))},
	} {
		if got := expf(tc.x); got != tc.want {
			t.Errorf("expf(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if s := silu(0); s != 0 {
		t.Errorf("silu(0) = %v", s)
	}
	if s := silu(10); math.Abs(float64(s)-10/(1+math.Exp(-10))) > 1e-5 {
		t.Errorf("silu(10) = %v", s)
	}
}

// TestFMA32RoundsOnce checks fma32 against exact arithmetic where rounding
// the f64 sum to f32 rounds twice: a·b = M − 3·2⁻⁴⁷ with M = 1 + 2⁻²² + 2⁻²⁴
// halfway between two f32s, and c = 3·2⁻⁴⁷ ± 3·2⁻⁶⁹, so the exact sum lies
// just above or below M while its f64 rounding is M itself.
func TestFMA32RoundsOnce(t *testing.T) {
	a, b := float32(1+3*0x1p-23), float32(1-0x1p-24)
	naiveWrong := 0
	for _, c := range []struct{ a, b, c float32 }{
		{a, b, 3*0x1p-47 + 3*0x1p-69}, {a, b, 3*0x1p-47 - 3*0x1p-69}, {1.5, 1.25, 0.125}, {3, 1.0 / 3, -1},
	} {
		want := exactFMA32(c.a, c.b, c.c)
		if got := fma32(c.a, c.b, c.c); got != want {
			t.Errorf("fma32(%v, %v, %v) = %v, want %v", c.a, c.b, c.c, got, want)
		}
		if float32(math.FMA(float64(c.a), float64(c.b), float64(c.c))) != want {
			naiveWrong++
		}
	}
	if naiveWrong == 0 {
		t.Error("no case needs the correction: the table does not test double rounding")
	}
}

// exactFMA32 rounds a·b+c, computed exactly, to f32.
func exactFMA32(a, b, c float32) float32 {
	const prec = 200
	p := new(big.Float).SetPrec(prec).Mul(new(big.Float).SetPrec(prec).SetFloat64(float64(a)), new(big.Float).SetPrec(prec).SetFloat64(float64(b)))
	p.Add(p, new(big.Float).SetPrec(prec).SetFloat64(float64(c)))
	f, _ := p.Float32()
	return f
}
