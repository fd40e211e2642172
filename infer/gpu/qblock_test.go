package gpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// randomBlocks fills m rows of k values of typ with random bytes, then
// sets each block's f16 scales (the offsets ggml gives them) to draws of
// scale, so every quant, sub-block scale and min the format can hold is
// met.
func randomBlocks(r *rand.Rand, typ gguf.Type, m, k int, scale func() float32) []byte {
	offsets := map[gguf.Type][]int{gguf.Q8_0: {0}, gguf.Q4_0: {0}, gguf.Q4_K: {0, 2}, gguf.Q5_K: {0, 2}, gguf.Q6_K: {208}}[typ]
	bb := typ.BlockBytes()
	data := make([]byte, m*k/typ.BlockSize()*bb)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for b := 0; b < len(data)/bb; b++ {
		for _, o := range offsets {
			binary.LittleEndian.PutUint16(data[b*bb+o:], quant.F32ToF16(scale()))
		}
	}
	return data
}

// roundedProduct is x rounded to typ's vec-dot type as the CPU rounds it,
// times the CPU's dequantization of w, in float64: dst[i·m + r].
func roundedProduct(t *testing.T, typ gguf.Type, w []byte, m, k int, x []float32, n int) []float64 {
	t.Helper()
	rb, _ := typ.RowBytes(int64(k))
	wf := make([]float32, m*k)
	for r := 0; r < m; r++ {
		if err := quant.DequantizeRow(typ, w[r*int(rb):(r+1)*int(rb)], wf[r*k:(r+1)*k]); err != nil {
			t.Fatal(err)
		}
	}
	ab, err := quant.ActivationBytes(typ, k)
	if err != nil {
		t.Fatal(err)
	}
	xq, xr := make([]byte, ab), make([]float32, k)
	out := make([]float64, n*m)
	for i := 0; i < n; i++ {
		quant.QuantizeActivations(typ, x[i*k:(i+1)*k], xq)
		if err := quant.DequantizeRow(quant.VecDotType(typ), xq, xr); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < m; r++ {
			var s float64
			for j, v := range xr {
				s += float64(wf[r*k+j]) * float64(v)
			}
			out[i*m+r] = s
		}
	}
	return out
}

// TestBlockKernels runs each block-quantized type through the kernel
// table's decode matvec (qblock_matmul) and prompt GEMM (qblock_gemm), and
// qblock_matmul's prompt tiling (the GEMM's fallback), on random blocks
// with ordinary and extreme f16 scales (f16's largest, its smallest normal
// and subnormals, zero, negative), against the CPU's dequantized weights
// times the CPU's rounding of x. The matrices keep the file's bytes on the
// device; the chunked case splits them over storage bindings of 24 rows.
func TestBlockKernels(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(35, 36))
	normal := func() float32 { return float32(r.Float64()*2-1) * 0.05 }
	extremes := []float32{65504, -65504, 6.1035156e-05, 5.9604645e-08, 0, -1, 0.5}
	extreme := func() float32 {
		if r.IntN(2) == 0 {
			return extremes[r.IntN(len(extremes))]
		}
		return normal()
	}
	cases := []struct {
		m, k, n int
		scale   func() float32
		kernel  string // "table": the kernel table's choice
		chunks  int
	}{
		{40, 512, 1, normal, "table", 1},
		{72, 1024, 70, normal, "table", 1}, // two token tiles, a part row tile
		{64, 512, 5, normal, "qblock_matmul", 1},
		{48, 512, 1, extreme, "table", 1},
		{64, 256, 9, extreme, "table", 1},
		{72, 512, 3, normal, "table", 3},
		{72, 512, 1, normal, "table", 3},
	}
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		for _, c := range cases {
			name := fmt.Sprintf("%s/%dx%d-n%d-%s-chunks%d", typ, c.m, c.k, c.n, c.kernel, c.chunks)
			t.Run(name, func(t *testing.T) {
				data := randomBlocks(r, typ, c.m, c.k, c.scale)
				xv := randFloats(r, c.n*c.k, 1)
				want := roundedProduct(t, typ, data, c.m, c.k, xv, c.n)
				if c.chunks > 1 {
					limit := b.d.Limits.MaxStorageBufferBindingSize
					b.d.Limits.MaxStorageBufferBindingSize = uint64(c.m / c.chunks * (len(data)/c.m + 4))
					defer func() { b.d.Limits.MaxStorageBufferBindingSize = limit }()
				}
				wi, err := b.LoadWeight(infer.WeightData{Name: name, Type: typ, Shape: []int64{int64(c.k), int64(c.m)}, Data: data})
				if err != nil {
					t.Fatal(err)
				}
				w := wi.(*weight)
				if len(w.blocks) != c.chunks || len(w.chunks) != 0 || w.bytes > int64(len(data)+4*c.chunks) {
					t.Fatalf("%d block chunks (want %d) and %d f32 chunks of %d bytes for %d bytes of blocks",
						len(w.blocks), c.chunks, len(w.chunks), w.bytes, len(data))
				}
				x, y := b.mustTensor(t, "x", c.n, c.k), b.mustTensor(t, "y", c.n, c.m)
				b.write(t, x, xv)
				got := b.run(t, c.n, 0, func() {
					if c.kernel == "qblock_matmul" {
						blockMatMul(b, matmul{dst: y, w: w, x: x, rows: c.n, n: c.n})
						return
					}
					b.MatMul(y, w, x)
				}, y)[0]
				checkClose(t, name, got, want, 1e-5)
			})
		}
	}
}
