package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// randKQuantMatrix is a matrix of random bytes (every code, 6-bit scale and
// min occurs) with sane super-block scales, which the reference quantizer
// would never produce on its own.
func randKQuantMatrix(t *testing.T, r *rand.Rand, typ gguf.Type, rows, cols int) *Matrix {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*int(rb))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for off := 0; off < len(data); off += typ.BlockBytes() {
		switch typ {
		case gguf.Q6_K:
			binary.LittleEndian.PutUint16(data[off+208:], F32ToF16(0.001+0.01*r.Float32())) // d
		default:
			binary.LittleEndian.PutUint16(data[off:], F32ToF16(0.001+0.01*r.Float32()))   // d
			binary.LittleEndian.PutUint16(data[off+2:], F32ToF16(0.001+0.01*r.Float32())) // dmin
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKQuantSIMDMatchesPortable compares the AVX-512 Q4_K, Q5_K and Q6_K
// kernels with dotQ4_K, dotQ5_K and dotQ6_K.
//
// Tolerance: the integer sums (per 32 or 16 columns, then over the scales
// and mins of a super-block) are exact in both, so they can only differ in
// the float steps: a few roundings per super-block and one addition per
// super-block into the row's sum, each off by at most ε·Σ|w·x| of what it
// covers. For 6144 columns that is under 30·ε ≈ 2e-6 of the row's Σ|w·x|;
// 1e-5 leaves room while a single wrong code (≈ 1/cols of Σ|w·x|, ≥ 1.6e-4
// here) still fails. In practice the kernels repeat the portable float
// steps in the same order and the results are bit-identical.
func TestKQuantSIMDMatchesPortable(t *testing.T) {
	if !haveVNNI {
		t.Skip("no AVX-512 VNNI on this CPU (or turned off by SetFeatures)")
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, tc := range []struct {
		typ                 gguf.Type
		rows, cols, threads int
	}{
		{gguf.Q4_K, 16, 256, 1}, {gguf.Q4_K, 5, 256, 2}, {gguf.Q4_K, 37, 2048, 2}, {gguf.Q4_K, 50, 2560, 1}, {gguf.Q4_K, 21, 6144, 2},
		{gguf.Q5_K, 16, 256, 1}, {gguf.Q5_K, 5, 256, 2}, {gguf.Q5_K, 37, 2048, 2}, {gguf.Q5_K, 50, 2560, 1}, {gguf.Q5_K, 21, 6144, 2},
		{gguf.Q6_K, 16, 256, 1}, {gguf.Q6_K, 5, 256, 2}, {gguf.Q6_K, 37, 2048, 2}, {gguf.Q6_K, 50, 2560, 1}, {gguf.Q6_K, 21, 6144, 2},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d/threads=%d", tc.typ, tc.rows, tc.cols, tc.threads), func(t *testing.T) {
			shape := tc
			m := randKQuantMatrix(t, r, tc.typ, shape.rows, shape.cols)
			if m.packed == nil {
				t.Fatalf("%s has no SIMD kernel", tc.typ)
			}
			w := make([]float32, shape.rows*shape.cols)
			for row := 0; row < shape.rows; row++ {
				if err := DequantizeRow(tc.typ, m.Row(row), w[row*shape.cols:(row+1)*shape.cols]); err != nil {
					t.Fatal(err)
				}
			}
			p := NewPool(shape.threads)
			defer p.Close()
			var a Activations
			exact, total := 0, 0
			for tokens := 1; tokens <= 17; tokens++ {
				x := randVec(r, shape.cols*tokens)
				if err := p.Quantize(&a, tc.typ, x, shape.cols, tokens); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, shape.rows*tokens)
				if err := p.MatMul(m, &a, got); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, len(got))
				portableKernel(m, &a, 0, shape.rows, 0, tokens, want)
				xq := make([]float32, shape.cols)
				for tok := 0; tok < tokens; tok++ {
					dequantizeQ8_K(a.Token(tok), xq)
					for row := 0; row < shape.rows; row++ {
						var mag float64
						for c, v := range w[row*shape.cols : (row+1)*shape.cols] {
							mag += math.Abs(float64(v) * float64(xq[c]))
						}
						i := tok*shape.rows + row
						if diff := math.Abs(float64(got[i] - want[i])); diff > 1e-5*mag {
							t.Fatalf("tokens=%d: y[token %d, row %d] = %v, portable %v (Σ|w·x| = %g)", tokens, tok, row, got[i], want[i], mag)
						}
						if got[i] == want[i] {
							exact++
						}
						total++
					}
				}
			}
			t.Logf("%d of %d outputs bit-identical to the portable kernel", exact, total)
		})
	}
}

// TestSetFeatures: each feature level picks its kernels for the matrices
// created after it, the K-quants included, and "all" gives the CPU's best
// back.
func TestSetFeatures(t *testing.T) {
	defer func() {
		if err := SetFeatures(FeaturesAll); err != nil {
			t.Fatal(err)
		}
	}()
	for _, tc := range []struct {
		f     Features
		vnni  bool
		simd  string
		avx2  bool
		other bool // another level applies on this CPU
	}{
		{FeaturesPortable, false, "generic", false, true},
		{FeaturesAVX2, false, "avx2", true, cpuAVX2},
		{FeaturesAll, cpuVNNI, "", cpuAVX2, true},
	} {
		if !tc.other {
			continue
		}
		if err := SetFeatures(tc.f); err != nil {
			t.Fatalf("SetFeatures(%v): %v", tc.f, err)
		}
		if haveVNNI != tc.vnni || haveAVX2 != tc.avx2 || haveAVX512 && tc.f != FeaturesAll {
			t.Fatalf("SetFeatures(%v): VNNI %v AVX2 %v AVX-512 %v", tc.f, haveVNNI, haveAVX2, haveAVX512)
		}
		if tc.simd != "" && SIMD() != tc.simd {
			t.Fatalf("SetFeatures(%v): SIMD() = %q, want %q", tc.f, SIMD(), tc.simd)
		}
		for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
			m := randKQuantMatrix(t, rand.New(rand.NewPCG(1, 2)), typ, 16, 256)
			if simd := m.packed != nil; simd != (tc.vnni || tc.avx2 && isaTable[typ].avx2.repack != nil) {
				t.Fatalf("SetFeatures(%v): %s repacked = %v", tc.f, typ, simd)
			}
		}
		var a Activations
		if err := a.prepare(gguf.Q4_K, 256, 1); err != nil {
			t.Fatal(err)
		}
		if (a.planes != nil) != (tc.vnni || tc.avx2 && isaTable[gguf.Q4_K].avx2.repack != nil) {
			t.Fatalf("SetFeatures(%v): Q8_K planes = %v", tc.f, a.planes != nil)
		}
	}
	if _, err := ParseFeatures("sse9"); !errors.Is(err, ErrFeatures) {
		t.Fatalf("ParseFeatures(sse9) = %v, want ErrFeatures", err)
	}
}
