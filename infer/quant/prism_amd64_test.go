package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestPrismSIMDMatchesPortable runs the Prism types' AVX-512 and AVX2
// kernels against the portable dot product. All three compute the same
// exact integer sums and the same single-rounded float steps, so they must
// agree bit for bit. Quantized Gaussian rows and random bytes (PQ2_0 code
// 3, PTQ1_0 bytes that are not canonical, a nonzero fifth trit in qh) both
// occur; 5, 27 and 37 rows end in a partial 16-row group (the masked stores
// of AVX-512, the scratch rows of AVX2), and the token counts cover every
// tile width and remainder.
func TestPrismSIMDMatchesPortable(t *testing.T) {
	if !haveAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(23, 24))
	for _, typ := range []gguf.Type{gguf.PQ2_0, gguf.PTQ1_0} {
		for _, rows := range []int{16, 5, 37, 64, 27} {
			for _, cols := range []int{128, 384, 2048} {
				for _, tokens := range []int{1, 2, 3, 5, 8, 9, 13, 70} {
					if cols == 2048 && tokens > 13 {
						continue
					}
					m := randMatrix(t, r, typ, rows, cols)
					if rows%2 == 1 {
						m = randMatrixFast(t, r, typ, rows, cols)
					}
					name := fmt.Sprintf("%s/%dx%d/tokens=%d", typ, rows, cols, tokens)
					checkPrismKernels(t, name, m, randVec(r, cols*tokens), tokens)
				}
			}
		}
	}
}

func checkPrismKernels(t *testing.T, name string, m *Matrix, x []float32, tokens int) {
	t.Helper()
	p := NewPool(2)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, m.Type, x, m.Cols, tokens); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, m.Rows*tokens)
	portableKernel(m, &a, 0, m.Rows, 0, tokens, want)
	kernels := map[string]cpuKernel{"avx2": isaTable[m.Type].avx2}
	if haveVNNI {
		kernels["avx512"] = isaTable[m.Type].vnni
	}
	for kname, kern := range kernels {
		useKernel(m, kern)
		// A sentinel past the last output catches stores beyond it.
		buf := make([]float32, len(want)+packRows)
		for i := range buf {
			buf[i] = -7
		}
		got := buf[:len(want)]
		if err := p.MatMul(m, &a, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range buf[len(want):] {
			if v != -7 {
				t.Fatalf("%s %s: stored past the outputs at +%d", name, kname, i)
			}
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s %s: y[%d] = %v, portable %v", name, kname, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkPTQ1_0 and BenchmarkPQ2_0: each kernel (portable, AVX2,
// AVX-512) on one thread, decode (1 token, a 27B-like 5120 × 5120 matrix)
// and prefill (512 tokens; fewer rows for the portable kernel), in
// bench_test.go's GMAC/s per CPU-second:
//
//	go test ./infer/quant -run X -bench 'PTQ1_0|PQ2_0'
func BenchmarkPTQ1_0(b *testing.B) { benchPrism(b, gguf.PTQ1_0) }
func BenchmarkPQ2_0(b *testing.B)  { benchPrism(b, gguf.PQ2_0) }

func benchPrism(b *testing.B, typ gguf.Type) {
	kernels := []struct {
		name string
		ok   bool
		kern cpuKernel
	}{{"portable", true, cpuKernel{product: portableKernel}}, {"avx2", haveAVX2, isaTable[typ].avx2}, {"avx512", haveVNNI, isaTable[typ].vnni}}
	for _, tokens := range []int{1, 512} {
		for _, k := range kernels {
			if !k.ok {
				continue
			}
			rows := 5120
			if tokens > 1 {
				rows = 1024
				if k.name == "portable" {
					rows = 128
				}
			}
			b.Run(fmt.Sprintf("%dx5120/tokens=%d/%s", rows, tokens, k.name), func(b *testing.B) {
				benchProductWith(b, typ, rows, 5120, tokens, func(m *Matrix) {
					useKernel(m, k.kern)
				})
			})
		}
	}
}
