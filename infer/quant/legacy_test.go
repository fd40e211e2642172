package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestLegacyHandMadeBlocks decodes blocks built by hand from ggml's
// layouts: Q4_1 x = d·q + m; Q5_0 x = d·(q − 16) and Q5_1 x = d·q + m with
// bit j of the u32 qh as element j's fifth bit.
func TestLegacyHandMadeBlocks(t *testing.T) {
	q41 := append(append(half(0.5), half(-1)...), make([]byte, 16)...)
	q41[4] = 0x2f
	got := dequant(t, gguf.Q4_1, q41, 32)
	if got[0] != 6.5 || got[16] != 0 || got[1] != -1 {
		t.Errorf("Q4_1: elements 0, 16, 1 = %v, %v, %v; want 6.5, 0, −1", got[0], got[16], got[1])
	}

	q50 := append(half(1), make([]byte, 20)...)
	binary.LittleEndian.PutUint32(q50[2:], 1|1<<17)
	q50[6] = 0x3f
	got = dequant(t, gguf.Q5_0, q50, 32)
	if got[0] != 15 || got[16] != -13 || got[1] != -16 || got[17] != 0 {
		t.Errorf("Q5_0: elements 0, 16, 1, 17 = %v, %v, %v, %v; want 15, −13, −16, 0", got[0], got[16], got[1], got[17])
	}

	q51 := append(append(half(1), half(2)...), make([]byte, 20)...)
	binary.LittleEndian.PutUint32(q51[4:], 1<<31)
	q51[8+15] = 0xf0
	got = dequant(t, gguf.Q5_1, q51, 32)
	if got[31] != 33 || got[15] != 2 {
		t.Errorf("Q5_1: elements 31, 15 = %v, %v; want 33, 2", got[31], got[15])
	}
}

// TestLegacyQuantizerCodes checks the reference quantizers' rounding:
// Q5_0's d = max/−16 (max the value of largest magnitude), codes
// trunc(x/d + 16.5) clamped to 31; the _1 types keep integer grids
// exactly.
func TestLegacyQuantizerCodes(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 8, -7.75, 3.7, -3.75 // d = −0.5
	y := dequant(t, gguf.Q5_0, quantizeTo(t, gguf.Q5_0, x), 32)
	// 8 → code 0 (8); −7.75 → 15.5+16.5 = 32 → 31 (−7.5); 3.7 → −7.4+16.5
	// → 9 (3.5); −3.75 → 7.5+16.5 = 24 (−4).
	if want := []float32{8, -7.5, 3.5, -4, 0}; !equal(y[:5], want) {
		t.Errorf("Q5_0: %v → %v, want %v", x[:5], y[:5], want)
	}
	for _, c := range []struct {
		typ    gguf.Type
		levels int
	}{{gguf.Q4_1, 16}, {gguf.Q5_1, 32}} {
		x := make([]float32, 64)
		for i := range x {
			x[i] = float32(i%c.levels) - 3 // d = 1, m = −3
		}
		if y := dequant(t, c.typ, quantizeTo(t, c.typ, x), len(x)); !equal(x, y) {
			t.Errorf("%s: integer grid not exact: %v vs %v", c.typ, x[:8], y[:8])
		}
	}
}

// TestQ8_1Activations: Q8_1's quants and d are the x86 Q8_0 quantizer's,
// s is f16(d·Σq) with d the f32 amax/127.
func TestQ8_1Activations(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	x := randVec(r, 256)
	clear(x[32:64]) // a zero block: s = 0
	q1 := make([]byte, 8*q8_1Bytes)
	q0 := make([]byte, 8*q8_0Bytes)
	QuantizeActivations(gguf.Q4_1, x, q1)
	QuantizeActivations(gguf.Q8_0, x, q0)
	for b := 0; b < 8; b++ {
		b1, b0 := q1[b*q8_1Bytes:][:q8_1Bytes], q0[b*q8_0Bytes:][:q8_0Bytes]
		if string(b1[:2]) != string(b0[:2]) || string(b1[4:]) != string(b0[2:]) {
			t.Fatalf("block %d: Q8_1 quants or d differ from Q8_0's", b)
		}
		var amax float32
		var sum int32
		for j, v := range x[32*b : 32*b+32] {
			amax = max(amax, abs32(v))
			sum += int32(int8(b1[4+j]))
		}
		if got, want := binary.LittleEndian.Uint16(b1[2:]), F32ToF16(amax/127*float32(sum)); got != want {
			t.Errorf("block %d: s = %#04x, want %#04x", b, got, want)
		}
	}
}
