package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Benchmarks on Bonsai-1.7B shapes. MB/s is weight bytes read per second.
//
//	go test ./infer/quant/ -run X -bench . -benchtime 2s
func BenchmarkMatVec(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q4_0, gguf.Q8_0} {
		for _, shape := range []struct{ rows, cols int }{{6144, 2048}, {151936, 2048}} {
			b.Run(fmt.Sprintf("%s/%dx%d", typ, shape.rows, shape.cols), func(b *testing.B) {
				benchProduct(b, typ, shape.rows, shape.cols, 1)
			})
		}
	}
}

func BenchmarkMatMul(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_0} {
		b.Run(fmt.Sprintf("%s/6144x2048x64", typ), func(b *testing.B) {
			benchProduct(b, typ, 6144, 2048, 64)
		})
	}
}

func benchProduct(b *testing.B, typ gguf.Type, rows, cols, tokens int) {
	r := rand.New(rand.NewPCG(1, 1))
	m := randMatrixFast(b, r, typ, rows, cols)
	x := randVec(r, cols*tokens)
	p := NewPool(0)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, typ, x, cols, tokens); err != nil {
		b.Fatal(err)
	}
	y := make([]float32, rows*tokens)
	b.SetBytes(int64(len(m.Data)))
	b.ResetTimer()
	for b.Loop() {
		if err := p.MatMul(m, &a, y); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N)*1e6/float64(tokens), "µs/token")
}

// randMatrixFast fills a matrix with random bytes and sane scales (the
// quantizers are too slow for 150k-row benchmarks).
func randMatrixFast(b testing.TB, r *rand.Rand, typ gguf.Type, rows, cols int) *Matrix {
	rb, _ := typ.RowBytes(int64(cols))
	data := make([]byte, rows*int(rb))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	bb := typ.BlockBytes()
	for off := 0; off < len(data); off += bb {
		copy(data[off:], []byte{0x00, 0x2c}) // d = 1/16 (f16 first in all these blocks)
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	return m
}
