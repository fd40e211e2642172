//go:build amd64 || arm64

package quant

// The kernels of integer sums (the NEON ones, and the AVX2 K-quants'):
// assembly computes per row the exact integer sums of its blocks,
// sub-blocks or lanes against a token's activations, in segments of at
// most sumsScratch sums, and per-type row functions scale and add them in
// the portable dot product's float order, with its very expressions, so
// the results are the portable kernels' bit for bit. blockSums (the
// assembly) and rowDot (the row functions) are per architecture; v picks
// an assembly variant (SDOT or not on arm64), gemm the float order of
// llama.cpp's repacked gemm for the tokens it computes (Matrix.gemmTokens).

// sumsScratch is the int32 sums one assembly call fills.
const sumsScratch = 512

// sumsProduct is the Matrix kernel: row by row, each row against every
// token of the chunk while it is in L1.
func sumsProduct(v bool, m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	var s [sumsScratch]int32
	gemm := m.gemmTokens(a.orderTokens())
	for r := r0; r < r1; r++ {
		w := m.Row(r)
		for t := t0; t < t1; t++ {
			x := a.Token(t)
			y[t*m.Rows+r] = rowDot(m.Type, v, t < gemm, m.Cols, w, x, &s)
		}
	}
}
