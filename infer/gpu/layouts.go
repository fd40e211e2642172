package gpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// layout is one family of weight types on the GPU, one row of the kernel
// table: how its matrices are stored (load), how the CPU dequantizes one
// of its rows (embedding rows not read on the device), and the kernels a
// MatMul over them runs, for a decode step (one token) and for a prompt pass, each
// list tried in order until a kernel takes the shape and the device's
// limits; the last of each takes every shape. A pass of 2 … rowsMaxTokens
// tokens (several sequences' decode steps, a short verify) takes the rows
// list: kernels that read each weight once for all its tokens without the
// prompt GEMMs' 64-token tiles, 8–32 times the work such a pass needs.
// Adding a type is adding it
// to a row's has, or a row with its own files (loader, kernels).
type layout struct {
	name   string
	has    func(gguf.Type) bool
	load   func(w *weight, d *Device, rowBytes int) error
	row    func(t gguf.Type, src []byte, dst []float32) error
	decode []matmulKernel
	rows   []matmulKernel
	prompt []matmulKernel
}

// rowsMaxTokens is the most tokens a pass takes the rows kernels for:
// the generic matmuls' tokens per workgroup (matmulShape), so each weight
// is read once.
const rowsMaxTokens = 8

// layouts is the kernel table. A decode Q1_0 matvec goes through the op
// list, where fuse joins it with its neighbours and encodeMatVec picks
// q1_xq, q1_w1, q1_popc or q1_matvec (matvec.go); so does one over a few
// rows, which encodeMatVec gives q1_matmul (rowsMatVec).
var layouts = []*layout{
	{
		name:   "Q1_0 sign words",
		has:    func(t gguf.Type) bool { return t == gguf.Q1_0 },
		load:   (*weight).repackQ1,
		row:    quant.DequantizeRow,
		decode: []matmulKernel{{"matvec", recordMatVec}, {"q1_matmul", q1MatMul}},
		rows:   []matmulKernel{{"matvec", recordMatVec}, {"q1_matmul", q1MatMul}},
		prompt: []matmulKernel{{"q1_lutgemm", lutGemm}, {"q1_gemm2", q1Gemm2}, {"q1_matmul", q1MatMul}},
	},
	{
		name:   "2-bit codes",
		has:    func(t gguf.Type) bool { _, ok := twoBit(t); return ok },
		load:   (*weight).loadTwoBit,
		row:    twoBitRow,
		decode: []matmulKernel{{"q2_matmul", q2MatMul}},
		rows:   []matmulKernel{{"q2_matmul", q2MatMul}},
		prompt: []matmulKernel{{"q2_matmul", q2MatMul}},
	},
	{
		name:   "Q8_0, Q4_0, Q4_K, Q5_K, Q6_K blocks as stored",
		has:    hasBlockFormat,
		load:   (*weight).loadBlocks,
		row:    quant.DequantizeRow,
		decode: []matmulKernel{{"qblock_matmul", blockMatMul}, {"f32_matmul", f32MatMul}},
		rows:   []matmulKernel{{"qblock_matmul", blockMatMul}, {"f32_matmul", f32MatMul}},
		prompt: []matmulKernel{{"qblock_gemm", blockGemm}, {"qblock_matmul", blockMatMul}, {"f32_matmul", f32MatMul}},
	},
	{
		name:   "f32 (every other type, dequantized at load)",
		has:    quant.Supported,
		load:   (*weight).dequantize,
		row:    quant.DequantizeRow,
		decode: []matmulKernel{{"f32_matmul", f32MatMul}},
		rows:   []matmulKernel{{"f32_matmul", f32MatMul}},
		prompt: []matmulKernel{{"f32_matmul", f32MatMul}},
	},
}

// layoutOf is t's row of the kernel table, or nil for a type the GPU
// cannot load.
func layoutOf(t gguf.Type) *layout {
	for _, l := range layouts {
		if l.has(t) {
			return l
		}
	}
	return nil
}

// loadTwoBit repacks a 2-bit matrix (a vector of them has no kernel).
func (w *weight) loadTwoBit(d *Device, rowBytes int) error {
	if w.m == 1 {
		return fmt.Errorf("gpu: weight %s: a %s vector: %w", w.name, w.typ, ErrUnsupported)
	}
	return w.repackTwoBit(d, rowBytes)
}
