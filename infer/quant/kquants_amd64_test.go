package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
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
		t.Skip("no AVX-512 VNNI on this CPU (or BONSAI_NOSIMD set)")
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

// TestNoSIMDEnv: BONSAI_NOSIMD=1 must leave the K-quants on the portable
// kernels. The switch is read at start-up, so the test runs itself again
// with it set.
func TestNoSIMDEnv(t *testing.T) {
	if os.Getenv("BONSAI_NOSIMD") != "" {
		for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
			m := randKQuantMatrix(t, rand.New(rand.NewPCG(1, 2)), typ, 16, 256)
			if m.packed != nil || haveVNNI {
				t.Fatalf("BONSAI_NOSIMD=1 still selects the SIMD %s kernel", typ)
			}
		}
		var a Activations
		if err := a.prepare(gguf.Q4_K, 256, 1); err != nil {
			t.Fatal(err)
		}
		if a.planes != nil {
			t.Fatal("BONSAI_NOSIMD=1 still builds Q8_K planes")
		}
		return
	}
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoSIMDEnv$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BONSAI_NOSIMD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with BONSAI_NOSIMD=1: %v\n%s", err, out)
	}
}
