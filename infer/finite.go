package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
)

// maxFiniteCheck bounds the float tensors checkFinite reads: norms, biases
// and scales are a few kilobytes each (an 8B's widest norm is 16 KiB), so
// checking them costs nothing at load; a large f16 matrix (an embedding)
// is left to the trial pass.
const maxFiniteCheck = 1 << 20

// checkFinite refuses a model whose small tensors hold NaN or infinity (in
// a value, or in a quantized block's scale). The trial pass alone misses
// some: in a quantized model the Q8_0 rounding of activations turns a NaN
// from a norm into a finite value, and the model answers finite garbage.
func checkFinite(f *gguf.File) error {
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Size > maxFiniteCheck {
			continue
		}
		if at := gguf.FirstNonFinite(t.Type, f.Data(t)); at >= 0 {
			return fmt.Errorf("%w: NaN or Inf in its weights or norms (tensor %s, element or block %d); the file is damaged: download or convert it again",
				ErrNonFinite, t.Name, at)
		}
	}
	return nil
}
