package quant

//go:generate sh -c "cd asm && BONSAI_ASM_SET=q1_0 go run . -out ../q1_0_amd64.s -stubs ../q1_0_stub_amd64.go -pkg quant"

import "sync"

// The Q1_0 kernels (asm/q1_0.go) sum in ggml's order (see dotQ1_0) by
// looking up, per 4-column group of ±1 weights, the token's exact partial
// product d_x·Σ±q among the group's 16 sign patterns. The tables (64
// bytes per group, 16 bytes per activation) are written once per token when
// the activations are quantized for Q1_0 weights, and then read by every
// row: a product runs over column tiles whose tables stay in L1 while the
// tile's rows stream past, each row group's eight lane accumulators per
// token waiting in scratch between tiles.

// q1TableBytes is the size of one token's tables for n activations.
func q1TableBytes(n int) int { return 16 * n }

// q1Tables writes the tables of one token's Q8_0 activations x into tab.
func q1Tables(x, tab []byte) {
	blocks := len(x) / q8_0Bytes
	_ = tab[blocks*512-1]
	if haveVNNI {
		q1_0Tables(&x[0], blocks, &tab[0])
	} else {
		q1_0TablesAVX2(&x[0], blocks, &tab[0])
	}
}

// q1TileTables is the table bytes of one column tile (all its tokens): half
// of a 48 KiB L1 data cache, the rest for the streaming weights and the
// accumulators.
const q1TileTables = 24 << 10

// q1TileTables1 is q1TileTables for single tokens: a whole 2048-column
// table (32 KiB) in one tile keeps each group's weights one contiguous
// stream, which decoding from memory needs more than L1 room.
const q1TileTables1 = 32 << 10

// q1Scratch is a call's accumulators and, for activations quantized for
// another type of weights, tables built on the spot.
type q1Scratch struct {
	acc []float32
	tab []byte
}

var q1Scratches = sync.Pool{New: func() any { return new(q1Scratch) }}

// q1_0Product computes rows [r0, r1) (r0 a multiple of 16) × tokens [t0,
// t1) with the AVX-512 kernels; q1_0AVX2Product with the AVX2 ones.
func q1_0Product(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	q1Run(m, a, r0, r1, t0, t1, y, false)
}

func q1_0AVX2Product(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	q1Run(m, a, r0, r1, t0, t1, y, true)
}

// q1Run gets a call's scratch and the tables of its tokens and runs the
// AVX2 or the AVX-512 kernels over them (a flag, not a function value,
// which would move the tables' closure to the heap).
func q1Run(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32, avx2 bool) {
	tb := q1TableBytes(a.N)
	g0, g1 := r0/packRows, (r1+packRows-1)/packRows
	sc := q1Scratches.Get().(*q1Scratch)
	defer q1Scratches.Put(sc)
	if n := (g1 - g0) * 4 * 8 * 16; cap(sc.acc) < n { // four tokens' 8 (AVX-512) or 16 (AVX2) lanes of 16 or 8 rows per group
		sc.acc = make([]float32, n)
	}
	p := a.planes
	tables := func(t int) []byte { return p.q1tab[t*tb:] }
	if !p.q1 { // quantized for another type of weights
		sc.tab = grow(sc.tab, (t1-t0)*tb)
		for t := t0; t < t1; t++ {
			q1Tables(a.Token(t), sc.tab[(t-t0)*tb:][:tb])
		}
		tables = func(t int) []byte { return sc.tab[(t-t0)*tb:] }
	}
	if avx2 {
		q1_0AVX2(m, r0, r1, t0, t1, tables, tb, sc.acc, y)
		return
	}
	q1_0AVX512(m, r0, r1, t0, t1, tables, tb, sc.acc, y)
}

// q1_0AVX2 runs the AVX2 kernels (asm/q1_0.go's q1_0AVX2Kernel, over the
// layout of q1AVX2Nibbles): four tokens at a time, then three, two or
// one, in the AVX-512 kernels' tiles.
func q1_0AVX2(m *Matrix, r0, r1, t0, t1 int, tables func(t int) []byte, tb int, acc []float32, y []float32) {
	blocks := m.Cols / qk1_0
	groupBytes := blocks * layoutQ1_0.blockBytes
	g0, g1 := r0/packRows, (r1+packRows-1)/packRows
	// The kernels store all 16 rows of a group: a partial last group goes
	// through out.
	full := g1
	if g1*packRows > m.Rows {
		full--
	}
	var out [4 * packRows]float32
	for t := t0; t < t1; {
		T := min(4, t1-t)
		tile := max(1, q1TileTables/(T*2048))
		if T == 1 {
			tile = q1TileTables1 / 2048
		}
		// Contiguous blocks: 8 ahead, half the AVX-512 kernels' distance;
		// in alternating tg64 runs of the 1.7B on a shared 2-core Zen 4, 8
		// beat 16 by 5–15% and 32, 4 or none by more.
		pf := 8 * layoutQ1_0.blockBytes
		if tile < blocks {
			pf = 2 * groupBytes // the same blocks two groups on
		}
		for c := 0; c < blocks; c += tile {
			n := min(tile, blocks-c)
			flags := q1Flags(c, n, blocks)
			tab := &tables(t)[c*2048]
			w := m.packed[g0*groupBytes+c*layoutQ1_0.blockBytes:]
			if full > g0 {
				q1AVX2Kernel(T, &w[0], groupBytes, full-g0, n, tab, tb, &acc[0], flags, &y[t*m.Rows+r0], 4*m.Rows, pf)
			}
			if full < g1 {
				last := w[(full-g0)*groupBytes:]
				q1AVX2Kernel(T, &last[0], groupBytes, 1, n, tab, tb, &acc[(full-g0)*128*T], flags, &out[0], 4*packRows, pf)
			}
		}
		if full < g1 {
			rows := m.Rows - full*packRows
			for i := range T {
				copy(y[(t+i)*m.Rows+full*packRows:][:rows], out[i*packRows:])
			}
		}
		t += T
	}
}

// q1AVX2Kernel calls the kernel for T tokens (static calls: through a
// function value the arguments would escape to the heap).
func q1AVX2Kernel(T int, w *byte, wstride, groups, blocks int, tab *byte, tstride int, acc *float32, flags int, y *float32, ldy, pf int) {
	switch T {
	case 1:
		q1_0x16avx2t1(w, wstride, groups, blocks, tab, tstride, acc, flags, y, ldy, pf)
	case 2:
		q1_0x16avx2t2(w, wstride, groups, blocks, tab, tstride, acc, flags, y, ldy, pf)
	case 3:
		q1_0x16avx2t3(w, wstride, groups, blocks, tab, tstride, acc, flags, y, ldy, pf)
	default:
		q1_0x16avx2t4(w, wstride, groups, blocks, tab, tstride, acc, flags, y, ldy, pf)
	}
}

// q1Flags are the kernels' flags for tile [c, c+n) of blocks: bit 0 on the
// first tile (start at zero), bit 1 on the last (reduce into y).
func q1Flags(c, n, blocks int) int {
	flags := 0
	if c == 0 {
		flags |= 1
	}
	if c+n == blocks {
		flags |= 2
	}
	return flags
}

// q1_0AVX512 is q1_0Product for the AVX-512 kernels: four tokens at a time
// (two, one for the rest), every row group over one column tile, then the
// next tile. (Running a few
// groups through all tiles at a time, so that their accumulators stay in
// L1, measured slower: the tables then come from L2 again and again.)
func q1_0AVX512(m *Matrix, r0, r1, t0, t1 int, tables func(t int) []byte, tb int, acc []float32, y []float32) {
	blocks := m.Cols / qk1_0
	groupBytes := blocks * layoutQ1_0.blockBytes
	g0, g1 := r0/packRows, (r1+packRows-1)/packRows
	lastMask := uint16(1<<min(packRows, m.Rows-(g1-1)*packRows) - 1)
	for t := t0; t < t1; {
		T, kern := 1, q1_0x16t1
		switch {
		case t1-t >= 4:
			T, kern = 4, q1_0x16p4
		case t1-t >= 2:
			T, kern = 2, q1_0x16t2
		}
		tile := max(1, q1TileTables/(T*2048))
		if T == 1 {
			tile = q1TileTables1 / 2048
		}
		pf := 16 * layoutQ1_0.blockBytes // contiguous blocks: a few ahead
		if tile < blocks {
			pf = 2 * groupBytes // the same blocks two groups on
		}
		for c := 0; c < blocks; c += tile {
			n := min(tile, blocks-c)
			w := m.packed[g0*groupBytes+c*layoutQ1_0.blockBytes:]
			kern(&w[0], groupBytes, g1-g0, n, &tables(t)[c*2048], tb, &acc[0], q1Flags(c, n, blocks), &y[t*m.Rows+g0*packRows], 4*m.Rows, lastMask, pf)
		}
		t += T
	}
}

// q1AVX2Nibbles returns layoutQ1_0's w in the AVX2 kernels' layout
// (asm/q1_0.go's q1_0AVX2Kernel): each 4-bit pattern n with bit 3 set
// becomes n XOR 7, the scales stay, and 64 bytes in front of the copy
// are there to read (the kernels read up to 3 bytes before a block).
func q1AVX2Nibbles(w []byte) []byte {
	var lut [256]byte
	for b := range lut {
		lo, hi := byte(b&15), byte(b>>4)
		lo ^= 7 * (lo >> 3)
		hi ^= 7 * (hi >> 3)
		lut[b] = lo | hi<<4
	}
	for blk := 0; blk+layoutQ1_0.blockBytes <= len(w); blk += layoutQ1_0.blockBytes {
		for i, b := range w[blk : blk+layoutQ1_0.scales] {
			w[blk+i] = lut[b]
		}
	}
	padded := make([]byte, 64+len(w))
	copy(padded[64:], w)
	return padded[64:]
}
