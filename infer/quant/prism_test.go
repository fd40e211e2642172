package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// base3 is N's five base-3 digits, most significant first.
func base3(n int) (d [5]uint8) {
	for i := 4; i >= 0; i-- {
		d[i] = uint8(n % 3)
		n /= 3
	}
	return d
}

// TestTritTable checks the shift-by-multiplying decoder against plain
// base-3 arithmetic: byte b stands for the fraction b/256, whose first five
// base-3 digits are those of N = floor(243·b/256), for every byte, canonical
// or not; and the encoder ceil(256·N/243) inverts it for every N.
func TestTritTable(t *testing.T) {
	for b := 0; b < 256; b++ {
		if got, want := trits[b], base3(b*243/256); got != want {
			t.Errorf("byte %d: trits %v, base-3 digits of ⌊243·b/256⌋ %v", b, got, want)
		}
	}
	for n := 0; n < 243; n++ {
		b := tritByte(base3(n))
		if int(b) != int(math.Ceil(256*float64(n)/243)) || trits[b] != base3(n) {
			t.Errorf("N = %d: byte %d decodes to %v", n, b, trits[b])
		}
	}
	// By hand: N = 2·81 + 0·27 + 1·9 + 1·3 + 2 = 176, ⌈256·176/243⌉ = 186.
	if b := tritByte([5]uint8{2, 0, 1, 1, 2}); b != 186 {
		t.Errorf("trits 2,0,1,1,2 → byte %d, want 186", b)
	}
}

// decodePTQ1_0 is an independent PTQ1_0 decoder: it walks the bytes and
// scatters each byte's digits (recovered as ⌊243·b/256⌋ in base 3) to the
// elements the layout gives them, where the package gathers per element.
func decodePTQ1_0(blk []byte) []float32 {
	d := F16ToF32(binary.LittleEndian.Uint16(blk[26:]))
	out := make([]float32, 128)
	put := func(b byte, elems ...int) {
		digits := base3(int(b) * 243 / 256)
		for n, j := range elems {
			out[j] = float32(int(digits[n])-1) * d
		}
	}
	for m := 0; m < 16; m++ { // qs[0..15], stride 16
		put(blk[m], m, m+16, m+32, m+48, m+64)
	}
	for m := 0; m < 8; m++ { // qs[16..23], stride 8 from 80
		put(blk[16+m], 80+m, 88+m, 96+m, 104+m, 112+m)
	}
	for h := 0; h < 2; h++ { // qh, four trits, stride 2 from 120
		put(blk[24+h], 120+h, 122+h, 124+h, 126+h)
	}
	return out
}

func TestPTQ1_0MatchesIndependentDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	blk := make([]byte, ptq1_0Bytes)
	for i := 0; i < 2000; i++ {
		for j := range blk {
			blk[j] = byte(r.Uint32())
		}
		if i < 256 { // every byte value in every position
			for j := 0; j < 26; j++ {
				blk[j] = byte(i + j)
			}
		}
		binary.LittleEndian.PutUint16(blk[26:], F32ToF16(float32(r.NormFloat64())))
		got, want := dequant(t, gguf.PTQ1_0, blk, 128), decodePTQ1_0(blk)
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
				t.Fatalf("block %x: element %d = %v, independent decoder %v", blk, j, got[j], want[j])
			}
		}
	}
}

// ternaryRow is n ternary weights times d per block of 128 (d an f16, at
// least one nonzero weight per block), as the codecs must keep them.
func ternaryRow(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for b := 0; b < n; b += qkPrism {
		d := F16ToF32(F32ToF16(float32(math.Exp(r.NormFloat64() - 3))))
		for j := b; j < b+qkPrism; j++ {
			x[j] = d * float32(r.IntN(3)-1)
		}
		x[b+r.IntN(qkPrism)] = d * float32(2*r.IntN(2)-1)
	}
	return x
}

// TestPrismTernaryExact: ternary weights survive both codecs exactly, and
// PTQ1_0 and PQ2_0 encodings of the same weights give bit-identical dot
// products (the same integer sums in the same float order).
func TestPrismTernaryExact(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for i := 0; i < 50; i++ {
		n := qkPrism * (1 + r.IntN(24))
		x := ternaryRow(r, n)
		dots := map[gguf.Type]float32{}
		xq := make([]byte, mustRowBytes(t, gguf.Q8_0, n))
		QuantizeActivations(gguf.Q8_0, randVec(r, n), xq)
		for _, typ := range []gguf.Type{gguf.PQ2_0, gguf.PTQ1_0} {
			w := quantizeTo(t, typ, x)
			if y := dequant(t, typ, w, n); !equal(x, y) {
				t.Fatalf("%s: ternary row not exact", typ)
			}
			dots[typ] = Dot(typ, n, w, xq)
		}
		if a, b := dots[gguf.PQ2_0], dots[gguf.PTQ1_0]; math.Float32bits(a) != math.Float32bits(b) {
			t.Fatalf("n=%d: PQ2_0 dot %v, PTQ1_0 dot %v", n, a, b)
		}
	}
}

// TestPrismCanonicalBytes: blocks as the reference quantizer writes them
// (d > 0 the largest magnitude, ternary codes, canonical trit bytes, qh's
// fifth trit zero) decode and re-encode to the same bytes.
func TestPrismCanonicalBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 30))
	for i := 0; i < 500; i++ {
		d := F32ToF16(float32(math.Exp(r.NormFloat64() - 3)))
		var tr [qkPrism]uint8
		for j := range tr {
			tr[j] = uint8(r.IntN(3))
		}
		if i%7 == 0 { // sparse blocks
			for j := range tr {
				tr[j] = 1
			}
		}
		tr[r.IntN(qkPrism)] = uint8(2 * r.IntN(2))

		pq := binary.LittleEndian.AppendUint16(nil, d)
		pq = append(pq, make([]byte, 32)...)
		for j, c := range tr {
			pq[2+j/4] |= c << (2 * (j % 4))
		}
		ptq := make([]byte, ptq1_0Bytes)
		for m := 0; m < 16; m++ {
			ptq[m] = tritByte([5]uint8{tr[m], tr[m+16], tr[m+32], tr[m+48], tr[m+64]})
		}
		for m := 0; m < 8; m++ {
			ptq[16+m] = tritByte([5]uint8{tr[80+m], tr[88+m], tr[96+m], tr[104+m], tr[112+m]})
		}
		for h := 0; h < 2; h++ {
			ptq[24+h] = tritByte([5]uint8{tr[120+h], tr[122+h], tr[124+h], tr[126+h], 0})
		}
		binary.LittleEndian.PutUint16(ptq[26:], d)

		for typ, blk := range map[gguf.Type][]byte{gguf.PQ2_0: pq, gguf.PTQ1_0: ptq} {
			if again := quantizeTo(t, typ, dequant(t, typ, blk, qkPrism)); !bytes.Equal(again, blk) {
				t.Fatalf("%s: %x → %x", typ, blk, again)
			}
		}
	}
}

// TestPQ2_0IsQ2_0G128 pins the shared codec: the legacy layout's bytes
// decode the same under either type, and PQ2_0 decodes code 3 as +2d.
func TestPQ2_0IsQ2_0G128(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	blk := make([]byte, 4*q2_0G128Bytes)
	for i := range blk {
		blk[i] = byte(r.Uint32())
	}
	for b := 0; b < 4; b++ {
		copy(blk[b*q2_0G128Bytes:], half(0.5))
	}
	blk[2] = 0b11_10_01_00
	a, b := dequant(t, gguf.PQ2_0, blk, 512), dequant(t, gguf.Q2_0G128, blk, 512)
	if !equal(a, b) {
		t.Fatal("PQ2_0 and Q2_0G128 decode the same bytes differently")
	}
	if want := []float32{-0.5, 0, 0.5, 1}; !equal(a[:4], want) {
		t.Fatalf("PQ2_0 codes 0..3 → %v, want %v", a[:4], want)
	}
}

// FuzzPTQ1_0Requantize: whatever the bytes, a block with a finite scale
// decodes to d·{−1, 0, 1}, which the quantizer must keep (d's sign may
// flip with the trits).
func FuzzPTQ1_0Requantize(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0xa5}, ptq1_0Bytes))
	f.Add(append(make([]byte, 26), 0x00, 0xbc))
	f.Fuzz(func(t *testing.T, blk []byte) {
		if len(blk) != ptq1_0Bytes {
			return
		}
		if d := F16ToF32(binary.LittleEndian.Uint16(blk[26:])); math.IsInf(float64(d), 0) || math.IsNaN(float64(d)) {
			return
		}
		x := dequant(t, gguf.PTQ1_0, blk, qkPrism)
		if y := dequant(t, gguf.PTQ1_0, quantizeTo(t, gguf.PTQ1_0, x), qkPrism); !equal(x, y) {
			t.Fatalf("%x: %v → %v", blk, x, y)
		}
	})
}
