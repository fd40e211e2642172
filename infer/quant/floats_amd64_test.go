package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestFloatSIMDMatchesPortable runs the f16 and bf16 kernels, AVX-512 and
// AVX2, against the portable dot products, which compute the same sums in
// the same order: the results must agree bit for bit. Row counts leave
// rows past the kernels' groups; row lengths not a multiple of 64 (or of
// tinyBLAS's vector) take the other paths; 1 token is the one-token order,
// more the tinyBLAS order with its leftover tokens.
func TestFloatSIMDMatchesPortable(t *testing.T) {
	isas := map[string]bool{"avx512": haveAVX512, "avx2": haveAVX2 && haveF16C}
	defer func(v bool) { haveAVX512 = v }(haveAVX512)
	r := rand.New(rand.NewPCG(33, 34))
	for isa, ok := range isas {
		if !ok {
			continue
		}
		haveAVX512 = isa == "avx512"
		for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16} {
			for _, rows := range []int{1, 3, 4, 5, 16, 37} {
				for _, cols := range []int{48, 64, 96, 128, 2048} {
					for _, tokens := range []int{1, 2, 3, 5, 8} {
						m := randMatrix(t, r, typ, rows, cols)
						want := isaTable[typ].avx2
						if isa == "avx512" {
							want = isaTable[typ].avx512
						}
						if !sameKernel(m.kernel, want.product) {
							t.Fatalf("%s %s: NewMatrix did not pick the SIMD kernel", isa, typ)
						}
						x := randVec(r, cols*tokens)
						for i := range x {
							x[i] *= float32(math.Exp(4 * r.NormFloat64())) // a wide range of magnitudes
						}
						name := fmt.Sprintf("%s/%s/%dx%d/tokens=%d", isa, typ, rows, cols, tokens)
						checkFloatKernel(t, name, m, x, tokens)
					}
				}
			}
		}
	}
}

func checkFloatKernel(t *testing.T, name string, m *Matrix, x []float32, tokens int) {
	t.Helper()
	p := NewPool(2)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, m.Type, x, m.Cols, tokens); err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, m.Rows*tokens+4)
	for i := range buf {
		buf[i] = -7
	}
	got := buf[:m.Rows*tokens]
	if err := p.MatMul(m, &a, got); err != nil {
		t.Fatal(err)
	}
	for _, v := range buf[len(got):] {
		if v != -7 {
			t.Fatalf("%s: stored past the outputs", name)
		}
	}
	want := make([]float32, len(got))
	portableKernel(m, &a, 0, m.Rows, 0, tokens, want)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: y[%d] = %v, portable %v", name, i, got[i], want[i])
		}
	}
}

// BenchmarkFloatKernel: the f16/bf16 kernels (portable, AVX2, AVX-512) on
// one thread, 1 and 64 tokens, in bench_test.go's GMAC/s per CPU-second:
//
//	go test ./infer/quant -run X -bench FloatKernel
func BenchmarkFloatKernel(b *testing.B) {
	avx512 := haveAVX512
	defer func() { haveAVX512 = avx512 }()
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16} {
		for _, tokens := range []int{1, 64} {
			for _, isa := range []string{"portable", "avx2", "avx512"} {
				if isa == "avx512" && !avx512 || isa == "avx2" && !(haveAVX2 && haveF16C) {
					continue
				}
				rows := 2048
				if isa == "portable" && tokens > 1 {
					rows = 128
				}
				b.Run(fmt.Sprintf("%s/%dx2048/tokens=%d/%s", typ, rows, tokens, isa), func(b *testing.B) {
					haveAVX512 = isa == "avx512"
					benchProductWith(b, typ, rows, 2048, tokens, func(m *Matrix) {
						if isa == "portable" {
							m.kernel = portableKernel
						}
					})
				})
			}
		}
	}
}
