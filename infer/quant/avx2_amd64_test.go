//go:build unix

// (unix for threadCPU, which the benchmark shares with bench_test.go.)

package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestAVX2MatchesPortable runs the Q4_0, Q8_0, Q2_0 and Q2_0G128 AVX2 kernels (which a CPU
// with AVX-512 VNNI never picks on its own) against the portable ones, and,
// where this CPU has VNNI, against the AVX-512 kernels: those compute the
// same exact integer sum per block and the same float steps, so the results
// must be bit-identical. Random-byte matrices (37 rows) put −128 into Q8_0
// weights, which the quantizer never writes; 5, 37 and 27 rows end in a
// partial 16-row group, of one half or of both.
func TestAVX2MatchesPortable(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(19, 20))
	for _, typ := range []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.Q2_0, gguf.Q2_0G128} {
		for _, rows := range []int{16, 5, 37, 64, 27} {
			for _, cols := range []int{32, 256, 2048} {
				if cols%typ.BlockSize() != 0 {
					continue
				}
				for _, tokens := range []int{1, 5, 9, 13} {
					name := fmt.Sprintf("%s/%dx%d/tokens=%d", typ, rows, cols, tokens)
					m := randMatrix(t, r, typ, rows, cols)
					if rows == 37 {
						m = randMatrixFast(t, r, typ, rows, cols)
					}
					checkAVX2(t, name, m, randVec(r, cols*tokens), tokens)
				}
			}
		}
	}
}

// TestAVX2Routing takes the path of a CPU with AVX2 but no AVX-512: NewMatrix
// must pick avx2Product and the planes must be filled.
func TestAVX2Routing(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2")
	}
	defer func(v bool) { haveVNNI = v }(haveVNNI)
	haveVNNI = false
	r := rand.New(rand.NewPCG(21, 22))
	for _, typ := range []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.Q2_0, gguf.Q2_0G128, gguf.PQ2_0, gguf.PTQ1_0} {
		m := randMatrix(t, r, typ, 40, 512)
		if !sameKernel(m.kernel, isaTable[typ].avx2.product) {
			t.Fatalf("%s: NewMatrix did not pick the AVX2 kernel", typ)
		}
		x := randVec(r, 512*6)
		p := NewPool(2)
		var a Activations
		if err := p.Quantize(&a, typ, x, 512, 6); err != nil {
			t.Fatal(err)
		}
		got, want := make([]float32, 40*6), make([]float32, 40*6)
		if err := p.MatMul(m, &a, got); err != nil {
			t.Fatal(err)
		}
		p.Close()
		portableKernel(m, &a, 0, 40, 0, 6, want)
		for i := range got {
			if !closeTo(got[i], want[i], 512) {
				t.Fatalf("%s: y[%d] = %v, portable %v", typ, i, got[i], want[i])
			}
		}
	}
}

func checkAVX2(t *testing.T, name string, m *Matrix, x []float32, tokens int) {
	t.Helper()
	useKernel(m, isaTable[m.Type].avx2)
	p := NewPool(2)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, m.Type, x, m.Cols, tokens); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, m.Rows*tokens)
	if err := p.MatMul(m, &a, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(got))
	portableKernel(m, &a, 0, m.Rows, 0, tokens, want)
	for i := range got {
		if !closeTo(got[i], want[i], m.Cols) {
			t.Fatalf("%s: y[%d] = %v, portable %v", name, i, got[i], want[i])
		}
	}
	if !haveVNNI {
		return
	}
	simd := make([]float32, len(got))
	isaTable[m.Type].vnni.product(m, &a, 0, m.Rows, 0, tokens, simd)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(simd[i]) {
			t.Fatalf("%s: y[%d] = %v, AVX-512 %v", name, i, got[i], simd[i])
		}
	}
}

// BenchmarkAVX2Kernel: the AVX2 kernels against the portable ones, one
// thread, with bench_test.go's GMAC/s per CPU-second:
//
//	go test ./infer/quant/ -run X -bench AVX2Kernel
func BenchmarkAVX2Kernel(b *testing.B) {
	if !haveAVX2 {
		b.Skip("no AVX2")
	}
	for _, typ := range []gguf.Type{gguf.Q4_0, gguf.Q8_0, gguf.Q2_0} {
		for _, tokens := range []int{1, 8} {
			for _, kern := range []string{"avx2", "portable"} {
				b.Run(fmt.Sprintf("%s/6144x2048/tokens=%d/%s", typ, tokens, kern), func(b *testing.B) {
					benchKernel(b, typ, 6144, 2048, tokens, kern == "avx2")
				})
			}
		}
	}
}

func benchKernel(b *testing.B, typ gguf.Type, rows, cols, tokens int, avx2 bool) {
	benchProductWith(b, typ, rows, cols, tokens, func(m *Matrix) {
		m.kernel, m.packed = portableKernel, nil
		if avx2 {
			useKernel(m, isaTable[typ].avx2)
		}
	})
}

// useKernel gives m the kernel k and k's weight layout.
func useKernel(m *Matrix, k cpuKernel) {
	m.kernel, m.packed = k.product, nil
	if k.repack != nil {
		m.packed = k.repack(m)
	}
}

// sameKernel reports whether got runs want's code (a kernel of
// isaTable's: each row's closures are its own code once the compiler
// inlines their constructors).
func sameKernel(got, want product) bool {
	return want != nil && reflect.ValueOf(got).Pointer() == reflect.ValueOf(want).Pointer()
}
