package quant

// floatKernels is one type's f32/f16/bf16 kernels (asm/floats.go), in the
// orders of floats.go: dot for one token (rows × 1, row length a multiple
// of 64), gemm for two or more (rows × tokens, and rows × 1 for the last
// tokens of a tile). They read the file's rows and the activations as they
// are: no repacking.
type floatKernels struct {
	dotRows, gemmRows, tokens int
	dot, gemm, gm1            floatKernel
}

type floatKernel = func(w *byte, ldw int, x *byte, ldx int, steps int, y *float32, ldy int)

// floatProduct runs the float kernels ks over rows [r0, r1) and tokens [t0,
// t1); rows past the last whole group of the kernel's rows, and rows whose
// length the kernels do not take, go through the portable dot product,
// which computes the same sums in the same order.
func floatProduct(ks *floatKernels, m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	n := m.Cols
	batch := m.traits.batchDot
	gemm := a.orderTokens() > 1 && n%batch.block == 0
	if !gemm && n%64 != 0 {
		portableKernel(m, a, r0, r1, t0, t1, y)
		return
	}
	rows := ks.gemmRows
	if !gemm {
		rows = ks.dotRows
	}
	whole := r0 + (r1-r0)/rows*rows
	ldy := 4 * m.Rows
	for r := r0; r < whole; r += rows {
		w := &m.Data[r*m.rowBytes]
		if !gemm {
			for t := t0; t < t1; t++ {
				ks.dot(w, m.rowBytes, &a.Data[t*a.rowBytes], a.rowBytes, n/64, &y[t*m.Rows+r], ldy)
			}
			continue
		}
		steps := n / batch.block
		t := t0
		for ; t+ks.tokens <= t1; t += ks.tokens {
			ks.gemm(w, m.rowBytes, &a.Data[t*a.rowBytes], a.rowBytes, steps, &y[t*m.Rows+r], ldy)
		}
		for ; t < t1; t++ {
			ks.gm1(w, m.rowBytes, &a.Data[t*a.rowBytes], a.rowBytes, steps, &y[t*m.Rows+r], ldy)
		}
	}
	if whole < r1 {
		portableKernel(m, a, whole, r1, t0, t1, y)
	}
}
