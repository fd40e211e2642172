package infer

import (
	"encoding/binary"
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
)

// maxFiniteCheck bounds the float tensors checkFinite reads: norms, biases
// and scales are a few kilobytes each (an 8B's widest norm is 16 KiB), so
// checking them costs nothing at load; a large f16 matrix (an embedding)
// is left to the trial pass.
const maxFiniteCheck = 1 << 20

// checkFinite refuses a model whose small float tensors hold NaN or
// infinity. The trial pass alone misses some: in a quantized model the
// Q8_0 rounding of activations turns a NaN from a norm into a finite
// value, and the model then answers finite garbage.
func checkFinite(f *gguf.File) error {
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Size > maxFiniteCheck {
			continue
		}
		if at := firstNonFinite(t.Type, f.Data(t)); at >= 0 {
			return fmt.Errorf("%w: NaN or Inf in its weights or norms (tensor %s, element %d); the file is damaged: download or convert it again",
				ErrNonFinite, t.Name, at)
		}
	}
	return nil
}

// firstNonFinite is the index of the first NaN or infinite element of a
// float tensor's bytes (an all-ones exponent), or -1; other types are not
// checked.
func firstNonFinite(t gguf.Type, b []byte) int {
	switch t {
	case gguf.F32:
		for i := 0; i+4 <= len(b); i += 4 {
			if binary.LittleEndian.Uint32(b[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	case gguf.F16:
		return firstAllOnes16(b, 0x7c00)
	case gguf.BF16:
		return firstAllOnes16(b, 0x7f80)
	}
	return -1
}

func firstAllOnes16(b []byte, exp uint16) int {
	for i := 0; i+2 <= len(b); i += 2 {
		if binary.LittleEndian.Uint16(b[i:])&exp == exp {
			return i / 2
		}
	}
	return -1
}
