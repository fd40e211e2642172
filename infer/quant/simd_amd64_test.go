package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestSIMDMatchesPortable runs every SIMD kernel against the portable one
// on random inputs: row counts that are not multiples of the 16-row groups,
// token counts that are not multiples of the 8-token tiles, and several
// thread counts.
func TestSIMDMatchesPortable(t *testing.T) {
	if !haveVNNI {
		t.Skip("no AVX-512 VNNI on this CPU")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q2_0G128, gguf.PQ2_0, gguf.PTQ1_0, gguf.Q4_0, gguf.Q5_0, gguf.Q8_0} {
		for _, shape := range []struct{ rows, cols, tokens int }{
			{16, 128, 1}, {5, 256, 3}, {33, 384, 1}, {100, 1024, 13}, {48, 2048, 70},
		} {
			m := randMatrix(t, r, typ, shape.rows, shape.cols)
			if m.packed == nil {
				t.Fatalf("%s: no SIMD kernel", typ)
			}
			x := randVec(r, shape.cols*shape.tokens)
			p := NewPool(2)
			var a Activations
			if err := p.Quantize(&a, typ, x, shape.cols, shape.tokens); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, shape.rows*shape.tokens)
			if err := p.MatMul(m, &a, got); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(got))
			portableKernel(m, &a, 0, shape.rows, 0, shape.tokens, want)
			for i := range got {
				if !closeTo(got[i], want[i], shape.cols) {
					t.Fatalf("%s %v: y[%d] = %v, portable %v", typ, shape, i, got[i], want[i])
				}
			}
			p.Close()
		}
	}
}

// TestQuantizeQ8_0SIMD: the AVX-512 activation quantizer must give the same
// bytes as the Go transcription of ggml's AVX code, ties and zero blocks
// included.
func TestQuantizeQ8_0SIMD(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(15, 16))
	x := randVec(r, 32*64)
	clear(x[32:64]) // an all-zero block
	for i := 64; i < 96; i++ {
		x[i] = float32(i-80) + 0.5 // with amax 127 below, exact ties
	}
	x[64] = 127
	for i := 96; i < 128; i++ {
		x[i] = float32(r.NormFloat64()) * 1e-30 // tiny values
	}
	got, want := make([]byte, 64*q8_0Bytes), make([]byte, 64*q8_0Bytes)
	if !quantizeQ8_0SIMD(x, got) {
		t.Fatal("SIMD quantizer not taken")
	}
	quantizeQ8_0X86Go(x, want)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("byte %d (block %d): SIMD %#02x, Go %#02x", i, i/q8_0Bytes, got[i], want[i])
		}
	}
}

// TestQuantizeSplitsFewTokensByColumns checks that a decoding step's few
// tokens, quantized by column ranges on several threads, give the bytes
// (and the kernels' planes) one thread gives the whole token, for every
// activation type's weights and lengths that do and do not split evenly.
func TestQuantizeSplitsFewTokensByColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, wt := range []gguf.Type{gguf.Q1_0, gguf.Q4_0, gguf.Q8_0, gguf.Q4_K} {
		for _, n := range []int{1024, 2048 + 256, 4096, 12288} {
			for tokens := 1; tokens <= 3; tokens++ {
				x := make([]float32, n*tokens)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				one := NewPool(1)
				var want Activations
				if err := one.Quantize(&want, wt, x, n, tokens); err != nil {
					t.Fatal(err)
				}
				one.Close()
				for _, threads := range []int{2, 3, 16} {
					p := NewPool(threads)
					var got Activations
					if err := p.Quantize(&got, wt, x, n, tokens); err != nil {
						t.Fatal(err)
					}
					p.Close()
					if string(got.Data) != string(want.Data) {
						t.Fatalf("%s n=%d tokens=%d threads=%d: quantized bytes differ", wt, n, tokens, threads)
					}
					if !samePlanes(got.planes, want.planes) {
						t.Fatalf("%s n=%d tokens=%d threads=%d: planes differ", wt, n, tokens, threads)
					}
				}
			}
		}
	}
}

// TestQ1_0ActivationsServeOnlyQ1_0 checks that activations quantized for
// Q1_0 weights (whose planes hold only the Q1_0 tables) are refused by a
// product with other weights of the same activation type, and reported as
// such, instead of feeding that product's kernels stale planes.
func TestQ1_0ActivationsServeOnlyQ1_0(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	q4 := randMatrix(t, r, gguf.Q4_0, 16, 256)
	p := NewPool(1)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, gguf.Q1_0, make([]float32, 256), 256, 1); err != nil {
		t.Fatal(err)
	}
	if !a.QuantizedFor(gguf.Q1_0) {
		t.Error("activations quantized for Q1_0: not QuantizedFor(Q1_0)")
	}
	if a.planes != nil && a.planes.q1 {
		if a.QuantizedFor(gguf.Q4_0) {
			t.Error("Q1_0 planes reported as serving Q4_0")
		}
		if err := p.MatVec(q4, &a, make([]float32, 16)); err == nil {
			t.Error("Q4_0 product on activations quantized for Q1_0: no error")
		}
	}
	if err := p.Quantize(&a, gguf.Q4_0, make([]float32, 256), 256, 1); err != nil {
		t.Fatal(err)
	}
	if !a.QuantizedFor(gguf.Q4_0) || !a.QuantizedFor(gguf.Q1_0) {
		t.Error("activations quantized for Q4_0 should serve Q4_0 and Q1_0 (whose kernels build tables on the spot)")
	}
}

func samePlanes(a, b *planes) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.q1 == b.q1 && string(a.q1tab) == string(b.q1tab) && string(a.qs) == string(b.qs) &&
		string(a.negq) == string(b.negq) && string(a.dk) == string(b.dk)
}
