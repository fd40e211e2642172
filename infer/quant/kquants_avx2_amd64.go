package quant

//go:generate sh -c "cd asm && go run ./avx2k -out ../kquants_avx2_amd64.s"

import (
	"encoding/binary"
	"sync"

	"github.com/bonsai-chat/bonsai/gguf"
)

// The AVX2 K-quant kernels, for x86 CPUs without AVX-512 (asm/avx2k):
// whole rows · tokens in assembly (Q4_K four rows × one token, or one row
// × four or eight tokens), the integer sums exact and the float part in
// the portable dot product's order and roundings per row and token (f16
// widened exactly, one rounding per multiply and add, FMA where the
// portable code calls FMA32), so bit for bit the portable kernels'.

//go:noescape
func q4_KRowAVX2(w, x *byte, blocks int, out *float32)

//go:noescape
func q4_KRow4AVX2(w, x *byte, wstride, ahead, blocks int, out *float32)

//go:noescape
func q4_KGemmRowAVX2(w, x *byte, blocks int, out *float32)

//go:noescape
func q4_KGemm4xAVX2(w, x *byte, blocks int, out *float32)

//go:noescape
func q4_KGemm8xAVX2(w, x *byte, xstride int, blocks int, out *float32)

//go:noescape
func q5_KRowAVX2(w, x *byte, blocks int, out *float32)

//go:noescape
func q6_KRowAVX2(w, x *byte, blocks int, out *float32)

// rowDot is one row · one token through the type's integer sums.
func rowDot(t gguf.Type, _, gemm bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	switch {
	case t == gguf.Q4_K && gemm:
		return rowQ4_KGemmAVX2(n, w, x, s)
	case t == gguf.Q4_K:
		return rowQ4_KAVX2(n, w, x, s)
	case t == gguf.Q5_K:
		return rowQ5_KAVX2(n, w, x, s)
	}
	return rowQ6_KAVX2(n, w, x, s)
}

// kquantsAVX2Product is the Matrix kernel of the AVX2 K-quants. Q4_K's
// tokens in llama.cpp's gemm order come in whole groups of 4 (tiles start
// at multiples of 4), which q4_KGemmAVX2 runs together; its other tokens
// (a decoding step's) go four rows at a time through q4_KGemvAVX2.
func kquantsAVX2Product(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	if m.Type != gguf.Q4_K {
		sumsProduct(false, m, a, r0, r1, t0, t1, y)
		return
	}
	gemm := min(m.gemmTokens(a.orderTokens()), t1)
	g1 := t0
	if gemm-t0 >= 4 && t0%4 == 0 {
		g1 = t0 + (gemm-t0)/4*4
	}
	if g1 > t0 {
		q4_KGemmAVX2(m, a, r0, r1, t0, g1, y)
	}
	if g1 < gemm { // a gemm token left alone by the tiling
		sumsProduct(false, m, a, r0, r1, g1, gemm, y)
		g1 = gemm
	}
	if g1 < t1 {
		q4_KGemvAVX2(m, a, r0, r1, g1, t1, y)
	}
}

// q4GroupBytes is one super-block of four tokens' Q8_K activations in
// interleaveQ8_K4's layout.
const q4GroupBytes = 16 + 64 + qkK*4

// q4GemmRows is the rows q4_KGemmAVX2 runs against one pair of groups at a
// time.
const q4GemmRows = 16

// q4Groups holds the interleaved activations of q4_KGemmAVX2's calls.
var q4Groups = sync.Pool{New: func() any { return new([]byte) }}

// q4_KGemmAVX2 is the product of whole groups of 4 tokens [t0, t1) in
// gemm order: their activations interleaved once, then each row against
// every group, two groups a call. The rows go in blocks of q4GemmRows
// against each pair of groups, so that the pair's activations (2.2 KB a
// super-block) stay in L1 while the block's rows pass, rather than every
// group streaming from L2 for each row.
func q4_KGemmAVX2(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	blocks := m.Cols / qkK
	groups := (t1 - t0) / 4
	gb := blocks * q4GroupBytes
	buf := q4Groups.Get().(*[]byte)
	defer q4Groups.Put(buf)
	if cap(*buf) < groups*gb {
		*buf = make([]byte, groups*gb)
	}
	x := (*buf)[:groups*gb]
	for g := range groups {
		interleaveQ8_K4(x[g*gb:(g+1)*gb], a, t0+4*g, blocks)
	}
	var out [16]float32
	for rb := r0; rb < r1; rb += q4GemmRows {
		re := min(rb+q4GemmRows, r1)
		for g := 0; g < groups; g += 2 {
			t := t0 + 4*g
			for r := rb; r < re; r++ {
				w := m.Row(r)
				if g+2 > groups {
					q4_KGemm4xAVX2(&w[0], &x[g*gb], blocks, &out[0])
					for i := range 4 {
						y[(t+i)*m.Rows+r] = out[i] - out[4+i]
					}
					continue
				}
				q4_KGemm8xAVX2(&w[0], &x[g*gb], gb, blocks, &out[0])
				for i := range 8 {
					y[(t+i)*m.Rows+r] = out[i] - out[8+i]
				}
			}
		}
	}
}

// interleaveQ8_K4 lays out tokens t…t+3 of a for q4_KGemm4xAVX2, per
// super-block: the four dx (f32), then the sums of the bsums in pairs
// (sub-block j's, int16) as [t0 j 0–3, t2 j 0–3, t0 j 4–7, t2 j 4–7] and
// the same for t1 and t3 (the order VPMADDWD against a row's mins and two
// unpacks leave the tokens in), then the quants: sub-block j's 32-byte
// step k is elements 4k…4k+3 of t0, t1, t2, t3, then 16+4k…16+4k+3 of
// each.
func interleaveQ8_K4(dst []byte, a *Activations, t, blocks int) {
	le := binary.LittleEndian
	var xs [4][]byte
	for i := range xs {
		xs[i] = a.Token(t + i)
	}
	for b := range blocks {
		d := dst[b*q4GroupBytes : (b+1)*q4GroupBytes]
		for i, x := range xs {
			xb := x[b*q8_KBytes : (b+1)*q8_KBytes]
			copy(d[4*i:4*i+4], xb[:4])
			// Tokens 0, 2 at 16, tokens 1, 3 at 48; the first of each pair
			// in words 0–3 and 8–11.
			base := 16 + 32*(i%2) + 8*(i/2)
			for j := range 8 {
				pair := int16(le.Uint16(xb[260+4*j:])) + int16(le.Uint16(xb[262+4*j:]))
				le.PutUint16(d[base+2*(j%4)+16*(j/4):], uint16(pair))
			}
			q := xb[4 : 4+qkK]
			for j := range 8 {
				for k := range 4 {
					step := d[80+32*(4*j+k):]
					copy(step[4*i:4*i+4], q[32*j+4*k:])
					copy(step[16+4*i:16+4*i+4], q[32*j+16+4*k:])
				}
			}
		}
	}
}

// q4PrefetchGroups is how many groups of four rows ahead q4_KRow4AVX2
// prefetches.
const q4PrefetchGroups = 1

// q4_KGemvAVX2 is the product of the tokens in gemv order: four rows at a
// time, the rows past a multiple of four one by one.
func q4_KGemvAVX2(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	var out [8]float32
	blocks := m.Cols / qkK
	r4 := r0 + (r1-r0)/4*4
	ahead := q4PrefetchGroups * 4 * m.rowBytes
	for r := r0; r < r4; r += 4 {
		w := m.Row(r)
		for t := t0; t < t1; t++ {
			q4_KRow4AVX2(&w[0], &a.Token(t)[0], m.rowBytes, ahead, blocks, &out[0])
			yt := y[t*m.Rows+r:]
			for i := range 4 {
				yt[i] = out[2*i] - out[2*i+1]
			}
		}
	}
	for r := r4; r < r1; r++ {
		w := m.Row(r)
		for t := t0; t < t1; t++ {
			q4_KRowAVX2(&w[0], &a.Token(t)[0], blocks, &out[0])
			y[t*m.Rows+r] = out[0] - out[1]
		}
	}
}

// rowQ4_KAVX2 is dotQ4_K: the assembly computes the two integers of each
// super-block and keeps the two sums, acc = fma(sumi, d_w·dx, acc) and
// accm = fma(mins, dmin_w·dx, accm); the dot product is acc − accm.
func rowQ4_KAVX2(n int, w, x []byte, _ *[sumsScratch]int32) float32 {
	var out [2]float32
	q4_KRowAVX2(&w[0], &x[0], n/qkK, &out[0])
	return out[0] - out[1]
}

// rowQ4_KGemmAVX2 is dotQ4_KGemm: the assembly makes the two FMAs once
// per pair of sub-blocks.
func rowQ4_KGemmAVX2(n int, w, x []byte, _ *[sumsScratch]int32) float32 {
	var out [2]float32
	q4_KGemmRowAVX2(&w[0], &x[0], n/qkK, &out[0])
	return out[0] - out[1]
}

// rowQ5_KAVX2 is dotQ5_K: the assembly keeps ggml's eight f32 lanes and
// the mins' sum with single-rounding FMAs (FMA32's arithmetic).
func rowQ5_KAVX2(n int, w, x []byte, _ *[sumsScratch]int32) float32 {
	var out [9]float32 // the lanes, then summs
	q5_KRowAVX2(&w[0], &x[0], n/qkK, &out[0])
	return sumLanes8((*[8]float32)(out[:8])) + out[8]
}

// rowQ6_KAVX2 is dotQ6_K, its eight lanes kept by the assembly.
func rowQ6_KAVX2(n int, w, x []byte, _ *[sumsScratch]int32) float32 {
	var acc [8]float32
	q6_KRowAVX2(&w[0], &x[0], n/qkK, &acc[0])
	return sumLanes8(&acc)
}
