package cpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
)

// The hybrid-layer ops this backend does not run yet (the Hadamard
// rotation): each fails the pass with ErrUnsupportedOp, so a hybrid model
// falls back or refuses to load with a clear reason.

func (b *Backend) unsupported(op string) {
	b.fail(fmt.Errorf("%w: %s on the cpu backend", infer.ErrUnsupportedOp, op))
}

func (b *Backend) Hadamard(dst, x infer.Tensor, r infer.Rotation) { b.unsupported("Hadamard") }
