package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestAVX2KQuants: the AVX2 K-quant kernels give the portable dot
// product's results bit for bit.
func TestAVX2KQuants(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("no AVX2 and FMA on this CPU")
	}
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		checkBitIdentical(t, typ, "avx2", kquantsAVX2Product)
	}
	// Q4_K's gemm kernels: three groups of 4 (a pair and one alone) and a
	// gemv token; then rows in three blocks of q4GemmRows, the last short,
	// and five groups.
	for _, cols := range []int{256, 2304} {
		checkBitIdenticalShape(t, gguf.Q4_K, "avx2", kquantsAVX2Product, 16, 13, cols)
	}
	checkBitIdenticalShape(t, gguf.Q4_K, "avx2", kquantsAVX2Product, 40, 21, 512)
}

// TestAVX2Q4_KRows: the four-row gemv kernel and its one-row remainder
// over row ranges that start and end off a multiple of four, as the pool's
// shares do, give the portable kernel's results bit for bit and leave the
// rows outside the range alone.
func TestAVX2Q4_KRows(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("no AVX2 and FMA on this CPU")
	}
	const rows, cols = 13, 1280
	r := rand.New(rand.NewPCG(4, 4))
	rb, err := rowBytes(gguf.Q4_K, cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for off := 0; off < len(data); off += gguf.Q4_K.BlockBytes() {
		for _, s := range sumsScaleOffsets[gguf.Q4_K] {
			binary.LittleEndian.PutUint16(data[off+s:], F32ToF16(float32(r.NormFloat64()/64)))
		}
	}
	m, err := NewMatrix(gguf.Q4_K, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tokens := range []int{1, 3} {
		x := make([]float32, tokens*cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		var a Activations
		if err := a.prepare(gguf.Q4_K, cols, tokens); err != nil {
			t.Fatal(err)
		}
		a.quantizeTokens(x, 0, tokens)
		want := make([]float32, rows*tokens)
		portableKernel(m, &a, 0, rows, 0, tokens, want)
		for _, span := range [][2]int{{0, 13}, {1, 12}, {3, 10}, {5, 6}, {0, 4}} {
			y := make([]float32, rows*tokens)
			for i := range y {
				y[i] = -1
			}
			q4_KGemvAVX2(m, &a, span[0], span[1], 0, tokens, y)
			for tok := 0; tok < tokens; tok++ {
				for row := 0; row < rows; row++ {
					i := tok*rows + row
					w := want[i]
					if row < span[0] || row >= span[1] {
						w = -1
					}
					if math.Float32bits(y[i]) != math.Float32bits(w) {
						t.Errorf("rows [%d, %d), %d tokens: y[token %d, row %d] = %v, want %v", span[0], span[1], tokens, tok, row, y[i], w)
					}
				}
			}
		}
	}
}

// BenchmarkAVX2Q4_K is the AVX2 Q4_K kernels (AVX-512 off) on the 1.7B's
// shapes: a 288 KB matrix in L2, a 7 MB one in cache, the 175 MB output
// head that streams from memory, and a prompt's tile of tokens.
//
//	go test ./infer/quant/ -run X -bench AVX2Q4_K
func BenchmarkAVX2Q4_K(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("no AVX2 and FMA on this CPU")
	}
	defer SetFeatures(FeaturesAll)
	for _, shape := range []struct{ rows, cols, tokens int }{{256, 2048, 1}, {6144, 2048, 1}, {2048, 6144, 1}, {151936, 2048, 1}, {6144, 2048, 64}, {2048, 6144, 64}} {
		b.Run(fmt.Sprintf("%dx%d/tokens=%d", shape.rows, shape.cols, shape.tokens), func(b *testing.B) {
			if err := SetFeatures(FeaturesAVX2); err != nil {
				b.Skip(err)
			}
			benchProduct(b, gguf.Q4_K, shape.rows, shape.cols, shape.tokens)
		})
	}
}

// BenchmarkAVX2Q4_KThreads is the output head's product on two threads,
// wall time: what decoding gets when both cores stream from memory.
func BenchmarkAVX2Q4_KThreads(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("no AVX2 and FMA on this CPU")
	}
	defer SetFeatures(FeaturesAll)
	if err := SetFeatures(FeaturesAVX2); err != nil {
		b.Skip(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	m := randMatrixFast(b, r, gguf.Q4_K, 151936, 2048)
	p := NewPool(2)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, gguf.Q4_K, randVec(r, 2048), 2048, 1); err != nil {
		b.Fatal(err)
	}
	y := make([]float32, m.Rows)
	b.SetBytes(int64(len(m.Data)))
	for b.Loop() {
		if err := p.MatMul(m, &a, y); err != nil {
			b.Fatal(err)
		}
	}
}
