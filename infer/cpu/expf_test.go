package cpu

import (
	"math"
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
