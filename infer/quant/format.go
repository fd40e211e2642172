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

// format is one row of the per-type kernel table: everything infer/quant
// knows about a type lives in its row, so adding a type touches one place.
type format struct {
	// vecDot is the type the activations are quantized to before a dot
	// product with a row of this type (llama.cpp's vec_dot_type).
	vecDot gguf.Type
	// dequantize and quantize work on whole blocks; the public wrappers
	// check lengths.
	dequantize func(src []byte, dst []float32)
	quantize   func(src []float32, dst []byte)
	// dot is the portable dot product of one row of n elements against
	// activations quantized to vecDot, in llama.cpp's arithmetic order.
	dot func(n int, w, x []byte) float32
}

var formats = map[gguf.Type]*format{
	gguf.F32:      {gguf.F32, dequantizeF32, quantizeF32, dotF32},
	gguf.F16:      {gguf.F16, dequantizeF16, quantizeF16, dotF16},
	gguf.BF16:     {gguf.BF16, dequantizeBF16, quantizeBF16, dotBF16},
	gguf.Q8_0:     {gguf.Q8_0, dequantizeQ8_0, quantizeQ8_0Ref, dotQ8_0},
	gguf.Q4_0:     {gguf.Q8_0, dequantizeQ4_0, quantizeQ4_0, dotQ4_0},
	gguf.Q1_0:     {gguf.Q8_0, dequantizeQ1_0, quantizeQ1_0, dotQ1_0},
	gguf.Q2_0:     {gguf.Q8_0, dequantizeQ2_0, quantizeQ2_0, dotQ2_0},
	gguf.Q2_0G128: {gguf.Q8_0, dequantizeQ2_0G128, quantizeQ2_0G128, dotQ2_0G128},
	gguf.PQ2_0:    {gguf.Q8_0, dequantizeQ2_0G128, quantizeQ2_0G128, dotPQ2_0},
	gguf.PTQ1_0:   {gguf.Q8_0, dequantizePTQ1_0, quantizePTQ1_0, dotPTQ1_0},
	gguf.Q4_K:     {gguf.Q8_K, dequantizeQ4_K, quantizeQ4_K, dotQ4_K},
	gguf.Q5_K:     {gguf.Q8_K, dequantizeQ5_K, quantizeQ5_K, dotQ5_K},
	gguf.Q6_K:     {gguf.Q8_K, dequantizeQ6_K, quantizeQ6_K, dotQ6_K},
	gguf.Q8_K:     {gguf.Q8_K, dequantizeQ8_K, quantizeQ8_K, nil},
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
func Supported(t gguf.Type) bool { _, ok := formats[t]; return ok }

func lookup(t gguf.Type) (*format, error) {
	f, ok := formats[t]
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
	if f, ok := formats[t]; ok {
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
	f := formats[t]
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
