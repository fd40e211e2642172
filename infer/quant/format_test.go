package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

var weightTypes = []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q1_0, gguf.Q2_0, gguf.Q2_0G128, gguf.PQ2_0, gguf.PTQ1_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

func half(f float32) []byte { return binary.LittleEndian.AppendUint16(nil, F32ToF16(f)) }

func dequant(t *testing.T, typ gguf.Type, src []byte, n int) []float32 {
	t.Helper()
	dst := make([]float32, n)
	if err := DequantizeRow(typ, src, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestDequantizeHandMadeBlocks(t *testing.T) {
	// Q1_0: d = 0.5, qs[0] = 0b00000101 → elements 0 and 2 are +d, the rest
	// of byte 0 −d; qs[15] = 0x80 → element 127 is +d.
	q1 := append(half(0.5), make([]byte, 16)...)
	q1[2], q1[17] = 0b101, 0x80
	got := dequant(t, gguf.Q1_0, q1, 128)
	for j, v := range got {
		want := float32(-0.5)
		if j == 0 || j == 2 || j == 127 {
			want = 0.5
		}
		if v != want {
			t.Fatalf("Q1_0 element %d = %v, want %v", j, v, want)
		}
	}

	// Q2_0 (g64): qs[0] = 0b11100100 → codes 00, 01, 10, 11 → −1, 0, +1, +2.
	q2 := append(half(2), make([]byte, 16)...)
	q2[2] = 0b11_10_01_00
	got = dequant(t, gguf.Q2_0, q2, 64)
	if want := []float32{-2, 0, 2, 4, -2}; !equal(got[:5], want) {
		t.Fatalf("Q2_0 = %v, want %v", got[:5], want)
	}
	// The legacy g128 layout: same codec, 32 code bytes.
	q2g := append(half(1), make([]byte, 32)...)
	q2g[33] = 0b01_10_11_00 // elements 124..127
	got = dequant(t, gguf.Q2_0G128, q2g, 128)
	if want := []float32{-1, 2, 1, 0}; !equal(got[124:], want) || got[0] != -1 {
		t.Fatalf("Q2_0G128 tail = %v, want %v", got[124:], want)
	}

	// Q4_0: d = 1, qs[0] = 0x9F → element 0 = 15−8 = 7, element 16 = 9−8 = 1.
	q4 := append(half(1), make([]byte, 16)...)
	q4[2] = 0x9f
	got = dequant(t, gguf.Q4_0, q4, 32)
	if got[0] != 7 || got[16] != 1 || got[1] != -8 {
		t.Fatalf("Q4_0 = %v", got)
	}

	// Q8_0: d = 0.25, q = −128, 4.
	q8 := append(half(0.25), make([]byte, 32)...)
	q8[2], q8[3] = 0x80, 4
	got = dequant(t, gguf.Q8_0, q8, 32)
	if got[0] != -32 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("Q8_0 = %v", got[:3])
	}

	// Q4_K: d = 1, dmin = 0.5; sub-block 0 scale 3 min 2, sub-block 5 scale
	// 17 (high bits in scales[1]) min 33.
	q4k := make([]byte, q4_KBytes)
	copy(q4k, half(1))
	copy(q4k[2:], half(0.5))
	ls := [8]uint8{3, 0, 0, 0, 0, 17, 0, 0}
	lm := [8]uint8{2, 0, 0, 0, 0, 33, 0, 0}
	packScaleMinK4(&ls, &lm, q4k[4:16])
	q4k[16] = 0x5a      // element 0: 10, element 32: 5
	q4k[16+64+1] = 0xc0 // sub-block 5 (high nibbles of bytes 64..95), element 160+1: 12
	got = dequant(t, gguf.Q4_K, q4k, 256)
	if got[0] != 3*10-1 || got[32] != 0 || got[161] != 17*12-16.5 || got[160] != -16.5 {
		t.Fatalf("Q4_K = %v %v %v %v", got[0], got[32], got[161], got[160])
	}

	// Q6_K: d = 0.5; scale[0] = −2; element 0: low nibble 1, high bits 2 → 33 − 32 = 1.
	q6k := make([]byte, q6_KBytes)
	copy(q6k[208:], half(0.5))
	q6k[192] = 0xfe
	q6k[0], q6k[128] = 0x01, 0x02
	got = dequant(t, gguf.Q6_K, q6k, 256)
	if got[0] != 0.5*-2*1 || got[1] != 0.5*-2*-32 {
		t.Fatalf("Q6_K = %v %v", got[0], got[1])
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func quantizeTo(t *testing.T, typ gguf.Type, x []float32) []byte {
	t.Helper()
	n, err := typ.RowBytes(int64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, n)
	if err := QuantizeRow(typ, x, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestRoundTripError bounds the RMS error of quantize→dequantize on
// Gaussian data, relative to the data's RMS. The bounds are the step size
// of each format with some slack (e.g. Q8_0: step amax/127 ≈ 3σ/127, RMS
// error step/√12 ≈ 0.7%); a broken packer is off by far more.
func TestRoundTripError(t *testing.T) {
	bounds := map[gguf.Type]float64{
		gguf.F32: 0, gguf.F16: 1e-3, gguf.BF16: 4e-3, gguf.Q8_0: 0.01, gguf.Q4_0: 0.13, gguf.Q4_1: 0.11, gguf.Q5_0: 0.065, gguf.Q5_1: 0.055, gguf.Q8_1: 0.01,
		gguf.Q4_K: 0.11, gguf.Q5_K: 0.055, gguf.Q6_K: 0.03, gguf.Q8_K: 0.01,
		// 1-bit codes of Gaussian data: sign·mean|x| leaves √(1 − 2/π) ≈
		// 0.60 of the RMS. Ternary codes with d = max|x| (≈ 2.5σ) zero
		// everything under 1.25σ, leaving ≈ 0.8 of it.
		gguf.Q1_0: 0.61, gguf.Q2_0: 0.9, gguf.Q2_0G128: 0.9, gguf.PQ2_0: 0.9, gguf.PTQ1_0: 0.9,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range append(weightTypes, gguf.Q8_K, gguf.Q8_1) {
		bound := bounds[typ]
		x := randVec(r, 1024)
		y := dequant(t, typ, quantizeTo(t, typ, x), len(x))
		var se, ss float64
		for i := range x {
			se += float64(x[i]-y[i]) * float64(x[i]-y[i])
			ss += float64(x[i]) * float64(x[i])
		}
		if rel := math.Sqrt(se / ss); rel > bound {
			t.Errorf("%s: relative RMS error %.4f > %.4f", typ, rel, bound)
		}
	}
}

func TestQuantizeExactCodes(t *testing.T) {
	// Q1_0 keeps signs and stores mean |x|.
	x := make([]float32, 128)
	for i := range x {
		x[i] = float32(i%3) - 1 // −1, 0, 1: zero counts as positive
	}
	y := dequant(t, gguf.Q1_0, quantizeTo(t, gguf.Q1_0, x), 128)
	d := F16ToF32(F32ToF16(float32(85) / 128)) // 85 nonzero of 128
	for i := range x {
		if want := map[bool]float32{true: d, false: -d}[x[i] >= 0]; y[i] != want {
			t.Fatalf("Q1_0 element %d: %v → %v, want %v", i, x[i], y[i], want)
		}
	}
	// Ternary data survives Q2_0 exactly (both layouts).
	for _, typ := range []gguf.Type{gguf.Q2_0, gguf.Q2_0G128} {
		x := make([]float32, 256)
		for i := range x {
			x[i] = 0.75 * (float32(i*7%3) - 1)
		}
		if y := dequant(t, typ, quantizeTo(t, typ, x), len(x)); !equal(x, y) {
			t.Errorf("%s: ternary data not exact: %v vs %v", typ, x[:6], y[:6])
		}
	}
	// Q8_0 reference rounds half away from zero: amax 127 → id 1, 2.5 → 3.
	x = make([]float32, 32)
	x[0], x[1], x[2] = 127, 2.5, -3.5
	q := quantizeTo(t, gguf.Q8_0, x)
	if int8(q[3]) != 3 || int8(q[4]) != -4 {
		t.Errorf("Q8_0 ref: 2.5 → %d, −3.5 → %d; want 3, −4", int8(q[3]), int8(q[4]))
	}
	// The x86 activation quantizer rounds half to even: 2.5 → 2, −3.5 → −4.
	QuantizeActivations(gguf.Q8_0, x, q)
	if int8(q[3]) != 2 || int8(q[4]) != -4 || int8(q[2]) != 127 {
		t.Errorf("Q8_0 x86: 2.5 → %d, −3.5 → %d; want 2, −4", int8(q[3]), int8(q[4]))
	}
}

func TestQ8KBlockSums(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := randVec(r, 512)
	q := make([]byte, 2*q8_KBytes)
	QuantizeActivations(gguf.Q4_K, x, q) // a weight type stands for its vec-dot type
	for b := 0; b < 2; b++ {
		blk := q[b*q8_KBytes:]
		for j := 0; j < 16; j++ {
			var s int32
			for _, v := range blk[4+16*j : 4+16*j+16] {
				s += int32(int8(v))
			}
			if got := bsum(blk, j); got != s {
				t.Fatalf("block %d sum %d = %d, want %d", b, j, got, s)
			}
		}
	}
}

// TestDotMatchesDequantized compares Dot with the float64 dot product of the
// dequantized weights and dequantized activations. Integer sums are exact,
// so only the float scaling differs: each term passes through a few float32
// multiplies and one accumulation per block, each off by at most 2⁻²⁴
// relative, hence the bound (blocks + 8)·2⁻²³·Σ|w·x|.
func TestDotMatchesDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range weightTypes {
		for _, n := range []int{256, 768, 2048} {
			if n%typ.BlockSize() != 0 {
				continue
			}
			w := quantizeTo(t, typ, randVec(r, n))
			x := randVec(r, n)
			act := VecDotType(typ)
			xq := make([]byte, mustRowBytes(t, act, n))
			QuantizeActivations(act, x, xq)
			wd, xd := dequant(t, typ, w, n), dequant(t, act, xq, n)
			var want, mag float64
			if act == gguf.Q8_1 {
				// Q8_1's s is Σq·d rounded to f16, as llama.cpp's dot
				// products read it: the weights' m meets s, their d·q the
				// quants (d·q is exact in float32 with m zeroed).
				wd, want, mag = offsetTerms(t, typ, w, xq, n)
			}
			for i := range wd {
				want += float64(wd[i]) * float64(xd[i])
				mag += math.Abs(float64(wd[i]) * float64(xd[i]))
			}
			got := Dot(typ, n, w, xq)
			blocks := float64(n / typ.BlockSize())
			if tol := (blocks + 8) * 0x1p-23 * mag; math.Abs(float64(got)-want) > tol {
				t.Errorf("%s n=%d: Dot = %v, dequantized = %v (tolerance %g)", typ, n, got, want, tol)
			}
		}
	}
}

// offsetTerms splits a row of a type with an offset m per block (Q4_1,
// Q5_1) against Q8_1 activations xq: it returns the row dequantized with m
// zeroed, and Σ m·s over the blocks and its magnitude.
func offsetTerms(t *testing.T, typ gguf.Type, w, xq []byte, n int) (wd []float32, sum, mag float64) {
	t.Helper()
	w = append([]byte(nil), w...)
	bb := typ.BlockBytes()
	for b := 0; b < n/32; b++ {
		m := float64(F16ToF32(binary.LittleEndian.Uint16(w[b*bb+2:])))
		s := float64(F16ToF32(binary.LittleEndian.Uint16(xq[b*q8_1Bytes+2:])))
		sum += m * s
		mag += math.Abs(m * s)
		w[b*bb+2], w[b*bb+3] = 0, 0
	}
	return dequant(t, typ, w, n), sum, mag
}

func mustRowBytes(t *testing.T, typ gguf.Type, n int) int {
	t.Helper()
	b, err := typ.RowBytes(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return int(b)
}

func TestBadInput(t *testing.T) {
	if err := DequantizeRow(gguf.Q1_0, make([]byte, 18), make([]float32, 100)); !errors.Is(err, ErrLength) {
		t.Errorf("100 Q1_0 elements: err = %v, want ErrLength", err)
	}
	if err := DequantizeRow(gguf.Q1_0, make([]byte, 17), make([]float32, 128)); !errors.Is(err, ErrLength) {
		t.Errorf("short Q1_0 block: err = %v, want ErrLength", err)
	}
	if err := QuantizeRow(gguf.IQ2_XXS, make([]float32, 256), make([]byte, 66)); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("IQ2_XXS: err = %v, want ErrUnsupportedType", err)
	}
	if err := QuantizeRow(gguf.Type(9999), nil, nil); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("unknown type: err = %v, want ErrUnsupportedType", err)
	}
}

func FuzzDequantize(f *testing.F) {
	f.Add(uint32(gguf.Q1_0), []byte{0x00, 0x3c, 1, 2, 3})
	f.Fuzz(func(t *testing.T, typ uint32, data []byte) {
		tt := gguf.Type(typ)
		if !Supported(tt) {
			return
		}
		bs, bb := tt.BlockSize(), tt.BlockBytes()
		n := len(data) / bb * bs
		if err := DequantizeRow(tt, data[:len(data)/bb*bb], make([]float32, n)); err != nil {
			t.Fatal(err)
		}
		_ = DequantizeRow(tt, data, make([]float32, n+1)) // must not panic
	})
}

// Every type with assembly has a traits row whose portable dot product
// the assembly is checked against.
func TestISATableRowsHaveTraits(t *testing.T) {
	for typ := range isaTable {
		if tr := table[typ]; tr == nil || tr.dot == nil {
			t.Errorf("%s has kernels in isaTable but no weight row in the traits table", typ)
		}
	}
}
