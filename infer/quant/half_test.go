package quant

import (
	"math"
	"testing"
)

func TestF16RoundTripAllHalves(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f { // NaN: must stay NaN
			if g := F16ToF32(F32ToF16(f)); g == g {
				t.Fatalf("NaN half %#04x came back as %v", h, g)
			}
			continue
		}
		if got := F32ToF16(f); got != uint16(h) {
			t.Fatalf("half %#04x → %v → %#04x", h, f, got)
		}
	}
}

func TestF16Values(t *testing.T) {
	tests := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65520, 0x7c00},                  // rounds up to Inf
		{float32(math.Inf(-1)), 0xfc00},  //
		{5.960464477539063e-08, 0x0001},  // smallest subnormal
		{2.9802322387695312e-08, 0x0000}, // half of it: tie to even → 0
		{4.470348358154297e-08, 0x0001},  // 1.5 × 2⁻²⁵ rounds up
		{1 + 1.0/2048, 0x3c00},           // tie between 1 and 1+2⁻¹⁰ → even (1)
		{1 + 3.0/2048, 0x3c02},           // tie → even (1+2⁻⁹)
		{6.103515625e-05, 0x0400},        // smallest normal
	}
	for _, tt := range tests {
		if got := F32ToF16(tt.f); got != tt.want {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tt.f, got, tt.want)
		}
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie → even
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie → even (up)
		{math.Float32frombits(0x3f808001), 0x3f81},
		{float32(math.Copysign(0, -1)), 0x8000},
	}
	for _, tt := range tests {
		if got := F32ToBF16(tt.f); got != tt.want {
			t.Errorf("F32ToBF16(%v) = %#04x, want %#04x", tt.f, got, tt.want)
		}
		if back := BF16ToF32(tt.want); F32ToBF16(back) != tt.want {
			t.Errorf("BF16 %#04x does not round-trip", tt.want)
		}
	}
	if nan := F32ToBF16(float32(math.NaN())); BF16ToF32(nan) == BF16ToF32(nan) {
		t.Errorf("NaN → %#04x is not NaN", nan)
	}
}

func TestRoundHalfEven(t *testing.T) {
	for i := -4 * 200; i <= 4*200; i++ { // quarter steps: every tie included
		f := float32(i) / 4
		if got, want := roundHalfEven(f), int32(math.RoundToEven(float64(f))); got != want {
			t.Fatalf("roundHalfEven(%v) = %d, want %d", f, got, want)
		}
	}
	if got := roundHalfEven(-126.50001); got != -127 {
		t.Errorf("roundHalfEven(-126.50001) = %d", got)
	}
}
