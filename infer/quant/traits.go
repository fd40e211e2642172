package quant

import (
	"errors"
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Sentinel errors callers can branch on.
var (
	// ErrUnsupportedType: infer/quant has no kernels for this tensor type.
	ErrUnsupportedType = errors.New("quant: unsupported tensor type")
	// ErrLength: a buffer's length does not fit the element count and type.
	ErrLength = errors.New("quant: bad buffer length")
)

// traits is one tensor type's row in the CPU kernel table, as ggml's
// type_traits: the type's block size and bytes are its gguf.Type's; its
// codec and portable dot products are here; its assembly, per
// instruction-set level, is its row of this architecture's isaTable
// (isa_amd64.go, isa_arm64.go), chosen when a Matrix is made. Adding a
// type takes its own files, one row here and, with assembly, one row
// there.
type traits struct {
	// vecDot is the type the activations are quantized to before a dot
	// product with a row of this type (llama.cpp's vec_dot_type).
	vecDot gguf.Type
	// dequantize and quantize work on whole blocks; the public wrappers
	// check lengths.
	dequantize func(src []byte, dst []float32)
	quantize   func(src []float32, dst []byte)
	// dot is the portable dot product of one row of n elements against
	// activations quantized to vecDot, in llama.cpp's arithmetic order.
	// nil for a type that is only ever activations.
	dot func(n int, w, x []byte) float32
	// batchDot, where set, is the dot product of products of two or more
	// tokens (llama.cpp's f16 and bf16 products change order with the
	// batch).
	batchDot *gemmDot
	// repackedGemm, where set, is the dot product of the tokens that
	// llama.cpp's repacked gemm computes (Matrix.gemmTokens): its x86
	// kernels for the type are repacked ones whose gemm rounds in another
	// order than their gemv (dot).
	repackedGemm func(n int, w, x []byte) float32
}

var table = map[gguf.Type]*traits{
	gguf.F32:      {vecDot: gguf.F32, dequantize: dequantizeF32, quantize: quantizeF32, dot: dotF32, batchDot: &gemmDot{16, gemmF32}},
	gguf.F16:      {vecDot: gguf.F16, dequantize: dequantizeF16, quantize: quantizeF16, dot: dotF16, batchDot: &gemmDot{16, gemmF16}},
	gguf.BF16:     {vecDot: gguf.BF16, dequantize: dequantizeBF16, quantize: quantizeBF16, dot: dotBF16, batchDot: &gemmDot{32, gemmBF16}},
	gguf.Q8_0:     {vecDot: gguf.Q8_0, dequantize: dequantizeQ8_0, quantize: quantizeQ8_0Ref, dot: dotQ8_0},
	gguf.Q4_0:     {vecDot: gguf.Q8_0, dequantize: dequantizeQ4_0, quantize: quantizeQ4_0, dot: dotQ4_0},
	gguf.Q5_0:     {vecDot: gguf.Q8_0, dequantize: dequantizeQ5_0, quantize: quantizeQ5_0, dot: dotQ5_0},
	gguf.Q1_0:     {vecDot: gguf.Q8_0, dequantize: dequantizeQ1_0, quantize: quantizeQ1_0, dot: dotQ1_0},
	gguf.Q2_0:     {vecDot: gguf.Q8_0, dequantize: dequantizeQ2_0, quantize: quantizeQ2_0, dot: dotQ2_0},
	gguf.Q2_0G128: {vecDot: gguf.Q8_0, dequantize: dequantizeQ2_0G128, quantize: quantizeQ2_0G128, dot: dotQ2_0G128},
	gguf.PQ2_0:    {vecDot: gguf.Q8_0, dequantize: dequantizeQ2_0G128, quantize: quantizeQ2_0G128, dot: dotPQ2_0},
	gguf.PTQ1_0:   {vecDot: gguf.Q8_0, dequantize: dequantizePTQ1_0, quantize: quantizePTQ1_0, dot: dotPTQ1_0},
	gguf.Q4_K:     {vecDot: gguf.Q8_K, dequantize: dequantizeQ4_K, quantize: quantizeQ4_K, dot: dotQ4_K, repackedGemm: dotQ4_KGemm},
	gguf.Q5_K:     {vecDot: gguf.Q8_K, dequantize: dequantizeQ5_K, quantize: quantizeQ5_K, dot: dotQ5_K},
	gguf.Q6_K:     {vecDot: gguf.Q8_K, dequantize: dequantizeQ6_K, quantize: quantizeQ6_K, dot: dotQ6_K},
	gguf.Q8_K:     {vecDot: gguf.Q8_K, dequantize: dequantizeQ8_K, quantize: quantizeQ8_K},
}

// activationQuantizers quantize activations exactly as llama.cpp's x86 CPU
// build does (ggml-cpu's from_float for each vec_dot_type).
var activationQuantizers = map[gguf.Type]func(x []float32, dst []byte){
	gguf.F32:  quantizeF32,
	gguf.F16:  quantizeF16,
	gguf.BF16: quantizeBF16,
	gguf.Q8_0: quantizeQ8_0X86,
	gguf.Q8_K: quantizeQ8_K,
}

// Supported reports whether t has kernels here (dequantize, quantize and,
// for weight types, a dot product).
func Supported(t gguf.Type) bool { _, ok := table[t]; return ok }

func lookup(t gguf.Type) (*traits, error) {
	f, ok := table[t]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedType, t)
	}
	return f, nil
}

// rowBytes is the byte size of n elements of t, or an error naming both.
func rowBytes(t gguf.Type, n int) (int, error) {
	b, err := t.RowBytes(int64(n))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrLength, err)
	}
	if b > math.MaxInt {
		return 0, fmt.Errorf("%w: %d elements of %s overflow int", ErrLength, n, t)
	}
	return int(b), nil
}

// DequantizeRow expands the blocks in src into len(dst) float32s. len(dst)
// must be a multiple of t's block size and src exactly that many blocks.
func DequantizeRow(t gguf.Type, src []byte, dst []float32) error {
	f, err := lookup(t)
	if err != nil {
		return err
	}
	want, err := rowBytes(t, len(dst))
	if err != nil {
		return err
	}
	if len(src) != want {
		return fmt.Errorf("%w: %d %s elements need %d bytes, got %d", ErrLength, len(dst), t, want, len(src))
	}
	f.dequantize(src, dst)
	return nil
}

// QuantizeRow encodes src into dst with llama.cpp's reference quantizer for
// t (quantize_row_*_ref: what llama-quantize writes without an importance
// matrix). len(src) must be a multiple of t's block size and dst exactly the
// row's byte size.
func QuantizeRow(t gguf.Type, src []float32, dst []byte) error {
	f, err := lookup(t)
	if err != nil {
		return err
	}
	want, err := rowBytes(t, len(src))
	if err != nil {
		return err
	}
	if len(dst) != want {
		return fmt.Errorf("%w: %d %s elements need %d bytes, got %d", ErrLength, len(src), t, want, len(dst))
	}
	f.quantize(src, dst)
	return nil
}

// VecDotType is the type activations are quantized to before they meet a
// row of type t, as in llama.cpp's CPU backend: Q8_0 for Q1_0, Q2_0,
// Q2_0G128, Q4_0 and Q8_0 (and for the Prism types PQ2_0 and PTQ1_0); Q8_K for the K-quants; F16, BF16 and F32 for
// themselves. It returns t itself for an unsupported type.
func VecDotType(t gguf.Type) gguf.Type {
	if f, ok := table[t]; ok {
		return f.vecDot
	}
	return t
}

// ActivationBytes is the size of n activations quantized for a row of
// weight type t (that is, n elements of VecDotType(t)).
func ActivationBytes(t gguf.Type, n int) (int, error) {
	if _, err := lookup(t); err != nil {
		return 0, err
	}
	return rowBytes(VecDotType(t), n)
}

// QuantizeActivations quantizes x to the activation type t exactly as
// llama.cpp's x86 CPU build does; t may be an activation type (Q8_0, Q8_K,
// F16, BF16, F32) or a weight type, which stands for its VecDotType. For
// Q8_0 that is the AVX path: id = 127/amax, round half to even — not the
// reference quantizer's 1/d and roundf. dst must be exactly the quantized
// size (ActivationBytes). Wrong lengths or types are programming errors and
// panic.
func QuantizeActivations(t gguf.Type, x []float32, dst []byte) {
	q, ok := activationQuantizers[t]
	if !ok {
		t = VecDotType(t)
		if q, ok = activationQuantizers[t]; !ok {
			panic(fmt.Sprintf("quant: no activation quantizer for %s", t))
		}
	}
	want, err := rowBytes(t, len(x))
	if err != nil {
		panic(err.Error())
	}
	if len(dst) != want {
		panic(fmt.Sprintf("quant: %d %s activations need %d bytes, got %d", len(x), t, want, len(dst)))
	}
	q(x, dst)
}

// Dot is the dot product of one row of n weights of type t (w, exactly the
// row's bytes) with n activations quantized by QuantizeActivations to
// VecDotType(t) (xq), computed like llama.cpp's ggml_vec_dot_*: integer sums
// per sub-block, then float scales. Bad lengths or types panic: this is the
// innermost loop, checked once by its callers.
func Dot(t gguf.Type, n int, w, xq []byte) float32 {
	f := table[t]
	if f == nil || f.dot == nil {
		panic(fmt.Sprintf("quant: no dot product for %s", t))
	}
	wb, err := rowBytes(t, n)
	if err != nil {
		panic(err.Error())
	}
	xb, _ := rowBytes(f.vecDot, n)
	if len(w) < wb || len(xq) < xb {
		panic(fmt.Sprintf("quant: Dot of %d %s: have %d/%d weight bytes, %d/%d activation bytes", n, t, len(w), wb, len(xq), xb))
	}
	return f.dot(n, w[:wb], xq[:xb])
}
