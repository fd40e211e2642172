package quant

import (
	"math"
	"testing"
)

// TestQ5_0Codec checks quantize_row_q5_0_ref's rules on hand-made blocks:
// the value of largest magnitude maps to code 0 (d = max/−16), fifth bits
// land in qh, and dequantization gives d·(q − 16).
func TestQ5_0Codec(t *testing.T) {
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j-16) / 4 // −4 … 3.75
	}
	blk := make([]byte, q5_0Bytes)
	quantizeQ5_0(x, blk)
	d := f16at(blk, 0)
	if d != 0.25 {
		t.Fatalf("d = %v, want 0.25 (max −4 / −16)", d)
	}
	for j := range x {
		// trunc(x/d + 16.5) = trunc(j + 0.5) = j.
		if q := q5Code(blk, j); int(q) != j {
			t.Errorf("code %d = %d, want %d", j, q, j)
		}
	}
	got := make([]float32, 32)
	dequantizeQ5_0(blk, got)
	for j := range x {
		if got[j] != x[j] {
			t.Errorf("x[%d] = %v, round trip %v", j, x[j], got[j])
		}
	}
	// An all-zero block has d = 0 and codes 16.
	quantizeQ5_0(make([]float32, 32), blk)
	for j := 0; j < 32; j++ {
		if q5Code(blk, j) != 16 {
			t.Fatalf("zero block: code %d = %d", j, q5Code(blk, j))
		}
	}
}

// TestDotQ5_0Lanes: dotQ5_0 equals the exact dot product of the dequantized
// values when every lane sum is small and exact in f32.
func TestDotQ5_0Lanes(t *testing.T) {
	w := make([]float32, 64)
	x := make([]float32, 64)
	for j := range w {
		w[j] = float32(j%32-16) / 8
		x[j] = float32((j*7)%13 - 6)
	}
	wb := make([]byte, 2*q5_0Bytes)
	quantizeQ5_0(w, wb)
	xb := make([]byte, 2*q8_0Bytes)
	quantizeQ8_0Ref(x, xb)
	wd, xd := make([]float32, 64), make([]float32, 64)
	dequantizeQ5_0(wb, wd)
	dequantizeQ8_0(xb, xd)
	var want float64
	for j := range wd {
		want += float64(wd[j]) * float64(xd[j])
	}
	if got := dotQ5_0(64, wb, xb); math.Abs(float64(got)-want) > 1e-4*math.Abs(want) {
		t.Fatalf("dot = %v, want %v", got, want)
	}
}
