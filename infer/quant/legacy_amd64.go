package quant

//go:generate sh -c "cd asm && BONSAI_ASM_SET=legacy go run . -out ../legacy_amd64.s -stubs ../legacy_stub_amd64.go -pkg quant"

// The packed layouts of Q4_1, Q5_0 and Q5_1 for their SIMD kernels
// (asm/legacy.go): Q4_0's nibble chunks, then for the 5-bit types a
// 64-byte plane of fifth bits (byte 4r+e, bit g: row r, column 4g+e), then
// the 16 f16 d and for the _1 types the 16 f16 m. Bits per weight stay the
// file's.
var (
	layoutQ4_1 = legacyLayout(func(blk []byte, j int) byte { return q4Code(blk[2:], j) }, false, 320, 256, 288)
	layoutQ5_0 = legacyLayout(func(blk []byte, j int) byte { return q5Code(blk, 2, j) }, true, 352, 320, 0)
	layoutQ5_1 = legacyLayout(func(blk []byte, j int) byte { return q5Code(blk, 4, j) }, true, 384, 320, 352)
)

// legacyLayout packs a type whose element j of a file block is code(blk,
// j), with a plane of fifth bits if hbits, and its m (from bytes 2–3 of the
// file's block) at mAt if mAt > 0. Padding rows stay zero: d = 0.
func legacyLayout(code func(blk []byte, j int) byte, hbits bool, blockBytes, scales, mAt int) *packedLayout {
	return &packedLayout{cols: 32, blockBytes: blockBytes, scales: scales, pack: func(rows *[packRows][]byte, dst []byte) {
		for r, blk := range rows {
			if blk == nil {
				continue
			}
			for p := 0; p < 4; p++ {
				for e := 0; e < 4; e++ {
					dst[64*p+4*r+e] = code(blk, 8*p+e)&0xf | (code(blk, 8*p+4+e)&0xf)<<4
				}
			}
			if hbits {
				for e := 0; e < 4; e++ {
					var b byte
					for g := 0; g < 8; g++ {
						b |= code(blk, 4*g+e) >> 4 << g
					}
					dst[256+4*r+e] = b
				}
			}
			if mAt > 0 {
				copy(dst[mAt+2*r:], blk[2:4])
			}
		}
	}}
}

// legacyKernels is one legacy type's kernels (asm/legacy.go): AVX-512 VNNI
// over 16 rows × 1 or 2 tokens, AVX2 over 8 rows × 1 token; eight lane
// accumulators per row and token (ggml's order) leave room for no more.
type legacyKernels struct {
	layout *packedLayout
	t1, t2 x16Kernel
	avx2   legacyAVX2Kernel
	// groupSums: the kernels' off is the planes' gsum (Q5_0), else negq
	// (the Q8_1 activations' s).
	groupSums bool
}

type legacyAVX2Kernel = func(w, sc *byte, blocks int, qs, off, dk *byte, y *float32)

var (
	q4_1Kernels = &legacyKernels{layout: layoutQ4_1, t1: q4_1x16t1, t2: q4_1x16t2, avx2: q4_1x8avx2t1}
	q5_0Kernels = &legacyKernels{layout: layoutQ5_0, t1: q5_0x16t1, t2: q5_0x16t2, avx2: q5_0x8avx2t1, groupSums: true}
	q5_1Kernels = &legacyKernels{layout: layoutQ5_1, t1: q5_1x16t1, t2: q5_1x16t2, avx2: q5_1x8avx2t1}
)

// isa is the kernels' row of isaTable.
func (ks *legacyKernels) isa() isaKernels {
	repackTo := func(m *Matrix) []byte { return repack(m, ks.layout) }
	return isaKernels{
		vnni: cpuKernel{product: func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
			ks.product(m, a, r0, r1, t0, t1, y)
		}, repack: repackTo},
		avx2: withF16C(cpuKernel{product: func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
			ks.productAVX2(m, a, r0, r1, t0, t1, y)
		}, repack: repackTo}),
	}
}

// planes returns token t's pointers into a's planes: quants, offsets
// (gsum or negq) and scales.
func (ks *legacyKernels) planes(a *Activations, t int) (qs, off, dk *byte) {
	p := a.planes
	tile, lane := t/tileTokens, t%tileTokens
	qs = &p.qs[tile*tileTokens*a.N+4*lane]
	dk = &p.dk[tile*tileTokens*a.N/8+4*lane]
	if ks.groupSums {
		return qs, &p.gsum[tile*tileTokens*a.N+4*lane], dk
	}
	return qs, &p.negq[tile*tileTokens*a.N/8+4*lane], dk
}

// product runs the AVX-512 kernels over rows [r0, r1) (r0 a multiple of
// 16) and tokens [t0, t1): pairs of tokens within a tile, single ones
// otherwise.
func (ks *legacyKernels) product(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	blocks := m.Cols / ks.layout.cols
	groupBytes := blocks * ks.layout.blockBytes
	for g0 := r0; g0 < r1; g0 += packRows {
		w := &m.packed[g0/packRows*groupBytes]
		rowMask := uint16(1<<min(packRows, m.Rows-g0) - 1)
		for t := t0; t < t1; {
			qs, off, dk := ks.planes(a, t)
			if t%2 == 0 && t1-t >= 2 {
				ks.t2(w, blocks, qs, off, dk, &y[t*m.Rows+g0], 4*m.Rows, rowMask)
				t += 2
				continue
			}
			ks.t1(w, blocks, qs, off, dk, &y[t*m.Rows+g0], 4*m.Rows, rowMask)
			t++
		}
	}
}

// productAVX2 is product with the AVX2 kernel, half a group and one token
// a call; a half of fewer than 8 rows goes through scratch (the kernel
// stores 8).
func (ks *legacyKernels) productAVX2(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	l := ks.layout
	blocks := m.Cols / l.cols
	groupBytes := blocks * l.blockBytes
	var scratch [8]float32
	for g0 := r0; g0 < r1; g0 += packRows {
		base := g0 / packRows * groupBytes
		rows := min(packRows, m.Rows-g0)
		for t := t0; t < t1; t++ {
			qs, off, dk := ks.planes(a, t)
			for half := 0; half < 2 && 8*half < rows; half++ {
				out := y[t*m.Rows+g0+8*half:]
				n := min(8, rows-8*half)
				dst := &scratch[0]
				if n == 8 {
					dst = &out[0]
				}
				ks.avx2(&m.packed[base+32*half], &m.packed[base+l.scales+16*half], blocks, qs, off, dk, dst)
				if n < 8 {
					copy(out[:n], scratch[:n])
				}
			}
		}
	}
}
