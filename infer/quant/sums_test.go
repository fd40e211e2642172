//go:build amd64 || arm64

package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// sumsScaleOffsets is where each type's f16 scales sit in its block: the
// test fills the rest of a block with random bytes (every code, 6-bit
// scale and min occurs) and these with sane values.
var sumsScaleOffsets = map[gguf.Type][]int{
	gguf.Q8_0: {0}, gguf.Q4_0: {0}, gguf.Q2_0: {0},
	gguf.Q4_K: {0, 2}, gguf.Q5_K: {0, 2}, gguf.Q6_K: {208},
}

type matrixKernel = func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32)

// checkBitIdentical runs kernel on random blocks of typ, for row lengths
// that cross the integer-sum kernels' segments, and wants the portable
// kernel's float32 bit for bit: for 3 rows × 2 tokens (the gemv order of
// every type), and for 8 rows × 6 tokens, where Q4_K's first 4 tokens take
// the order of llama.cpp's repacked gemm (Matrix.gemmTokens).
func checkBitIdentical(t *testing.T, typ gguf.Type, name string, kernel matrixKernel) {
	t.Helper()
	for _, shape := range []struct{ rows, tokens int }{{3, 2}, {8, 6}} {
		for _, cols := range []int{256, 1280, 2304, 19200} {
			checkBitIdenticalShape(t, typ, name, kernel, shape.rows, shape.tokens, cols)
		}
	}
}

func checkBitIdenticalShape(t *testing.T, typ gguf.Type, name string, kernel matrixKernel, rows, tokens, cols int) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(typ), uint64(cols)))
	rb, err := rowBytes(typ, cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for off := 0; off < len(data); off += typ.BlockBytes() {
		for _, s := range sumsScaleOffsets[typ] {
			binary.LittleEndian.PutUint16(data[off+s:], F32ToF16(float32(r.NormFloat64()/64)))
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, tokens*cols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var a Activations
	if err := a.prepare(typ, cols, tokens); err != nil {
		t.Fatal(err)
	}
	a.quantizeTokens(x, 0, tokens)
	y := make([]float32, rows*tokens)
	kernel(m, &a, 0, rows, 0, tokens, y)
	want := make([]float32, rows*tokens)
	portableKernel(m, &a, 0, rows, 0, tokens, want)
	for tok := 0; tok < tokens; tok++ {
		for row := 0; row < rows; row++ {
			i := tok*rows + row
			if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s %s %d×%d, %d tokens: y[token %d, row %d] = %v, portable %v", typ, name, rows, cols, tokens, tok, row, y[i], want[i])
			}
		}
	}
}
