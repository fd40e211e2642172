package quant

// avx2Kernels is one type's AVX2 kernels over the AVX-512 kernels' packed
// layout, for CPUs without AVX-512 (asm/avx2.go): a whole 16-row group × 1
// token, or one 8-row half of it × 4 tokens. Rows 8–15 sit 32 bytes into
// each 64-byte chunk; x8t4[h] is the kernel for half h (the same for both
// halves except PTQ1_0's, whose tail bytes both halves share).
type avx2Kernels struct {
	layout *packedLayout
	x16t1  avx2Kernel
	x8t4   [2]avx2Kernel
}

type avx2Kernel = func(w, sc *byte, blocks int, qs, negq, dk *byte, y *float32, ldy int)

// avx2Product is simdProduct for the AVX2 kernels ks.
func avx2Product(ks *avx2Kernels, m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	l := ks.layout
	blocks := m.Cols / l.cols
	groupBytes := blocks * l.blockBytes
	p := a.planes
	// The kernels store whole 8- or 16-row blocks; the last group's rows
	// past m.Rows would land in the next token's outputs, so a partial
	// group goes through scratch.
	var scratch [packRows * 4]float32
	for g0 := r0; g0 < r1; g0 += packRows {
		base := g0 / packRows * groupBytes
		rows := min(packRows, m.Rows-g0)
		for t := t0; t < t1; {
			tile, lane := t/tileTokens, t%tileTokens
			qs := &p.qs[tile*tileTokens*a.N+4*lane]
			negq := &p.negq[tile*tileTokens*a.N/8+4*lane]
			dk := &p.dk[tile*tileTokens*a.N/8+4*lane]
			out, ldy := y[t*m.Rows+g0:], m.Rows
			if rows < packRows {
				out, ldy = scratch[:], packRows
			}
			n := 1
			if lane%4 == 0 && t1-t >= 4 {
				n = 4
				for half := 0; half < 2 && 8*half < rows; half++ {
					ks.x8t4[half](&m.packed[base+32*half], &m.packed[base+l.scales+16*half], blocks, qs, negq, dk, &out[8*half], 4*ldy)
				}
			} else {
				ks.x16t1(&m.packed[base], &m.packed[base+l.scales], blocks, qs, negq, dk, &out[0], 4*ldy)
			}
			if rows < packRows {
				for i := 0; i < n; i++ {
					copy(y[(t+i)*m.Rows+g0:][:rows], scratch[packRows*i:])
				}
			}
			t += n
		}
	}
}
