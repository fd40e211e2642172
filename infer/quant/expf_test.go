package quant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// expf must stay within a few ulps of exp over softmax's and SiLU's range,
// and saturate like ggml's outside it.
func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x < 88; x += 0.0137 {
		got, want := float64(ExpF(x)), math.Exp(float64(x))
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
		if got := ExpF(tc.x); got != tc.want {
			t.Errorf("ExpF(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if s := SiLU(0); s != 0 {
		t.Errorf("SiLU(0) = %v", s)
	}
	if s := SiLU(10); math.Abs(float64(s)-10/(1+math.Exp(-10))) > 1e-5 {
		t.Errorf("SiLU(10) = %v", s)
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

// TestFMA32 checks fma32 against the exact a·b+c rounded once to f32 (big
// arithmetic), on random operands and on ones whose f64 sum is an f32 tie.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(a, b, c float32) {
		exact := new(big.Float).SetPrec(200).Mul(big.NewFloat(float64(a)).SetPrec(200), big.NewFloat(float64(b)).SetPrec(200))
		exact.Add(exact, big.NewFloat(float64(c)).SetPrec(200))
		want, _ := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Set(exact).Float32()
		if math.Abs(float64(want)) < 0x1p-126 {
			return // f32 subnormals: big.Float does not model them
		}
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%v, %v, %v) = %v, exact %v", a, b, c, got, want)
		}
	}
	for range 200000 {
		a := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10)))
		b := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10)))
		c := float32(r.NormFloat64() * math.Exp2(float64(r.IntN(20)-10)))
		check(a, b, c)
		// c = 1 + ulp/2 − a·b's tail: the f64 sum sits on an f32 tie with
		// a tiny product just off it.
		check(0x1p-30*a, 0x1p-30, 1+0x1p-24)
		check(0x1p-60, a, 1+0x1p-24)
	}
}
