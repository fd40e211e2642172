package cpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
)

// The hybrid-layer ops this backend does not run yet: each fails the pass
// with ErrUnsupportedOp, so a hybrid model falls back or refuses to load
// with a clear reason. Implementations replace these one by one.

func (b *Backend) unsupported(op string) {
	b.fail(fmt.Errorf("%w: %s on the cpu backend", infer.ErrUnsupportedOp, op))
}

func (b *Backend) NewRecurrentState(spec infer.RecurrentSpec) error {
	if spec.Layers == 0 {
		return nil
	}
	return fmt.Errorf("%w: recurrent state on the cpu backend", infer.ErrUnsupportedOp)
}
func (b *Backend) ReadRecurrentState(dst []float32) error {
	return fmt.Errorf("%w: recurrent state on the cpu backend", infer.ErrUnsupportedOp)
}
func (b *Backend) WriteRecurrentState(src []float32) error {
	return fmt.Errorf("%w: recurrent state on the cpu backend", infer.ErrUnsupportedOp)
}
func (b *Backend) CopyCols(dst, src infer.Tensor, c infer.Cols) { b.unsupported("CopyCols") }
func (b *Backend) Unary(dst, x infer.Tensor, f infer.Act)       { b.unsupported("Unary") }
func (b *Backend) Gate(dst, x, g infer.Tensor, f infer.Act)     { b.unsupported("Gate") }
func (b *Backend) DecayGate(dst, alpha infer.Tensor, bias, a infer.Weight) {
	b.unsupported("DecayGate")
}
func (b *Backend) L2Norm(dst, x infer.Tensor, group int, eps float32) { b.unsupported("L2Norm") }
func (b *Backend) CausalConv(dst, x infer.Tensor, w infer.Weight, layer int) {
	b.unsupported("CausalConv")
}
func (b *Backend) DeltaNet(dst, q, k, v, g, beta infer.Tensor, layer int, d infer.DeltaNetSpec) {
	b.unsupported("DeltaNet")
}
