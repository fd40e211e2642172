package infer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// KVType is how a KV cache stores K or V (llama.cpp's --cache-type-k and
// --cache-type-v). The zero value is f16, llama.cpp's default.
type KVType uint8

const (
	// KVF16 stores each value as an IEEE half.
	KVF16 KVType = iota
	// KVQ8_0 stores each head's row as Q8_0 blocks of 32 values (an f16
	// scale and 32 int8s, 34 bytes), quantized as llama.cpp's CPU build
	// quantizes activations (id = 127/amax, round half to even). It takes
	// 17/32 of f16's bytes. HeadDim must be a multiple of 32.
	KVQ8_0
)

// ErrKVType is returned for a cache type name bonsai does not know.
var ErrKVType = errors.New("unknown KV cache type")

// KVTypeNames are the cache types, by their llama.cpp names.
var KVTypeNames = []string{"f16", "q8_0"}

// ParseKVType reads a cache type as llama.cpp names it ("f16", "q8_0";
// case does not matter).
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "f16":
		return KVF16, nil
	case "q8_0":
		return KVQ8_0, nil
	}
	return 0, fmt.Errorf("%w %q (want one of %s)", ErrKVType, s, strings.Join(KVTypeNames, ", "))
}

func (t KVType) String() string {
	switch t {
	case KVF16:
		return "f16"
	case KVQ8_0:
		return "q8_0"
	}
	return fmt.Sprintf("KVType(%d)", uint8(t))
}

// GGUFType is the tensor type of the cache's rows.
func (t KVType) GGUFType() gguf.Type {
	if t == KVQ8_0 {
		return gguf.Q8_0
	}
	return gguf.F16
}

// Quantized says the type is a block quantization (llama.cpp then needs
// flash attention, and bonsai follows its flash-attention numerics).
func (t KVType) Quantized() bool { return t == KVQ8_0 }

// RowBytes is the size of n values of type t (n a multiple of 32 for
// Q8_0; a partial block counts whole).
func (t KVType) RowBytes(n int) int64 {
	if t == KVQ8_0 {
		return int64((n+31)/32) * 34
	}
	return 2 * int64(n)
}

// KVTypes are the types of a cache's K and V.
type KVTypes struct {
	K, V KVType
}

// Quantized says K or V is quantized: attention then follows llama.cpp's
// flash attention, which llama.cpp requires for a quantized V.
func (t KVTypes) Quantized() bool { return t.K.Quantized() || t.V.Quantized() }

func (t KVTypes) String() string { return "K " + t.K.String() + ", V " + t.V.String() }

// check refuses a type unknown or a head size the type cannot block.
func (t KVTypes) check(headDim int) error {
	for _, x := range []KVType{t.K, t.V} {
		if x != KVF16 && x != KVQ8_0 {
			return fmt.Errorf("%w: %v", ErrKVType, x)
		}
		if x == KVQ8_0 && headDim%32 != 0 {
			return fmt.Errorf("%w: a q8_0 KV cache needs a head size that is a multiple of 32, this model's is %d", ErrUnsupportedType, headDim)
		}
	}
	return nil
}
