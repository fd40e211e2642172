package quant

//go:generate sh -c "cd asm && go run . -out ../simd_amd64.s -stubs ../simd_stub_amd64.go -pkg quant"

import (
	"encoding/binary"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
)

// kernelSet is one type's AVX-512 kernels: 16 rows × 1, 2, 4 or 8 tokens,
// over the packed layout.
type kernelSet struct {
	layout *packedLayout
	// neg16: the kernels read the neg16 plane in place of negq.
	neg16 bool
	t     [4]x16Kernel // 1, 2, 4, 8 tokens
	// g is the same for the tokens that llama.cpp's repacked gemm computes
	// (Matrix.gemmTokens), for the types where it rounds otherwise than t.
	g [4]x16Kernel
}

type x16Kernel = func(w *byte, blocks int, qs, negq, dk *byte, y *float32, ldy int, rowMask uint16)

// planes is Q8_0 activations re-laid for the kernels, per tile of 8
// tokens:
//
//	qs   [N/4 groups][8 tokens] 4 bytes   the quants, a token's 4-byte groups interleaved
//	negq [N/32 blocks][8 tokens] int32    −Σq of each 32-block
//	dk   [N/32 blocks][8 tokens] float32  the block's d (from its f16)
//
// or, for activations quantized for Q1_0 weights, the Q1_0 kernels'
// lookup tables (q1_0_amd64.go) instead: q1tab holds 16·N bytes per token.
// The Q1_0 kernels read nothing else, and laying out the other planes too
// cost a decoding step as much again, on the one thread that quantizes it.
type planes struct {
	qs, negq, dk []byte
	// neg16 is laid out as qs, a dword per 4-byte group: −16·Σq of the
	// group, where the Q5_0 kernels start each lane's integer sum.
	neg16 []byte
	q1tab []byte
	q1    bool // q1tab is filled, qs, negq and dk are not
}

func (a *Activations) preparePlanes(wt gguf.Type) {
	if !(haveVNNI && a.Type == gguf.Q8_K || (haveVNNI || haveAVX2) && a.Type == gguf.Q8_0) {
		a.planes = nil
		return
	}
	if a.planes == nil {
		a.planes = &planes{}
	}
	p := a.planes
	p.q1 = wt == gguf.Q1_0
	if p.q1 {
		p.q1tab = grow(p.q1tab, a.Tokens*q1TableBytes(a.N))
		return
	}
	tiles := (a.Tokens + tileTokens - 1) / tileTokens
	p.qs = grow(p.qs, tiles*tileTokens*a.N)
	p.neg16 = grow(p.neg16, tiles*tileTokens*a.N)
	p.negq = grow(p.negq, tiles*tileTokens*a.N/8) // 4 bytes per 32 activations
	p.dk = grow(p.dk, tiles*tileTokens*a.N/8)
}

// planesFor reports whether the planes serve weights of type wt: those
// laid out for Q1_0 serve only Q1_0.
func (a *Activations) planesFor(wt gguf.Type) bool {
	return a.planes == nil || !a.planes.q1 || wt == gguf.Q1_0
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

const tileTokens = 8

// fillPlanes lays out columns [c0, c1) of token t (multiples of 32; the
// whole token for Q8_K).
func (a *Activations) fillPlanes(t, c0, c1 int) {
	p := a.planes
	if p == nil {
		return
	}
	if a.Type == gguf.Q8_K {
		a.fillPlanesQ8_K(t)
		return
	}
	src := a.Token(t)
	if p.q1 {
		tb := p.q1tab[t*q1TableBytes(a.N):]
		q1Tables(src[c0/qk8_0*q8_0Bytes:c1/qk8_0*q8_0Bytes], tb[q1TableBytes(c0):q1TableBytes(c1)])
		return
	}
	tile, lane := t/tileTokens, t%tileTokens
	qs := p.qs[tile*tileTokens*a.N:]
	neg16 := p.neg16[tile*tileTokens*a.N:]
	negq := p.negq[tile*tileTokens*a.N/8:]
	dk := p.dk[tile*tileTokens*a.N/8:]
	for b := c0 / qk8_0; b < c1/qk8_0; b++ {
		blk := (*[q8_0Bytes]byte)(src[b*q8_0Bytes:])
		var sum int32
		for g := 0; g < 8; g++ {
			word := binary.LittleEndian.Uint32(blk[2+4*g:])
			binary.LittleEndian.PutUint32(qs[4*((8*b+g)*tileTokens+lane):], word)
			gs := int32(int8(word)) + int32(int8(word>>8)) + int32(int8(word>>16)) + int32(int8(word>>24))
			binary.LittleEndian.PutUint32(neg16[4*((8*b+g)*tileTokens+lane):], uint32(-16*gs))
			sum += gs
		}
		binary.LittleEndian.PutUint32(negq[4*(b*tileTokens+lane):], uint32(-sum))
		binary.LittleEndian.PutUint32(dk[4*(b*tileTokens+lane):], math.Float32bits(f16at(blk[:], 0)))
	}
}

// simdProduct runs the AVX-512 kernels ks over rows [r0, r1) (r0 a
// multiple of 16) and tokens [t0, t1).
func simdProduct(ks *kernelSet, m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	blocks := m.Cols / ks.layout.cols
	groupBytes := blocks * ks.layout.blockBytes
	p := a.planes
	gemm := m.gemmTokens(a.orderTokens())
	for g0 := r0; g0 < r1; g0 += packRows {
		w := &m.packed[g0/packRows*groupBytes]
		rowMask := uint16(1<<min(packRows, m.Rows-g0) - 1)
		for t := t0; t < t1; {
			tile, lane := t/tileTokens, t%tileTokens
			kernels, end := &ks.t, t1
			if t < gemm {
				kernels, end = &ks.g, min(t1, gemm)
			}
			n, kern := kernelTokens(lane, end-t)
			qs := &p.qs[tile*tileTokens*a.N+4*lane]
			negq := &p.negq[tile*tileTokens*a.N/8+4*lane]
			if ks.neg16 {
				negq = &p.neg16[tile*tileTokens*a.N+4*lane]
			}
			dk := &p.dk[tile*tileTokens*a.N/8+4*lane]
			kernels[kern](w, blocks, qs, negq, dk, &y[t*m.Rows+g0], 4*m.Rows, rowMask)
			t += n
		}
	}
}

// kernelTokens picks the widest kernel (8, 4, 2 or 1 tokens) that stays
// inside the current tile of 8 and the remaining tokens.
// It returns the token count and the kernel's index in kernelSet.t.
func kernelTokens(lane, left int) (n, index int) {
	switch {
	case lane%8 == 0 && left >= 8:
		return 8, 3
	case lane%4 == 0 && left >= 4:
		return 4, 2
	case lane%2 == 0 && left >= 2:
		return 2, 1
	}
	return 1, 0
}

// haveF16AVX2: the AVX2 attention kernels (asm/f16avx2.go) convert with
// F16C.
func haveF16AVX2() bool { return !haveAVX512 && haveAVX2 && haveF16C }

func dotsF16SIMD(x []float32, h []uint16, stride int, out []float32) bool {
	if len(x)%16 != 0 || len(x) == 0 {
		return false
	}
	switch {
	case haveAVX512:
		dotsF16(&x[0], &h[0], stride, len(out), len(x)/16, &out[0])
	case haveF16AVX2():
		dotsF16AVX2(&x[0], &h[0], stride, len(out), len(x)/16, &out[0])
	default:
		return false
	}
	return true
}

func weightedSumF16SIMD(p []float32, h []uint16, stride int, out []float32) bool {
	switch {
	case haveAVX512 && len(out)%16 == 0 && len(out) > 0:
		weightedSumF16(&p[0], &h[0], stride, len(p), len(out)/16, &out[0])
	case haveF16AVX2() && len(out)%8 == 0 && len(out) > 0:
		weightedSumF16AVX2(&p[0], &h[0], stride, len(p), len(out)/8, &out[0])
	default:
		return false
	}
	return true
}

func weightedSumF16TSIMD(p []float32, h []uint16, stride int, out []float32) bool {
	switch {
	case haveAVX512:
		weightedSumF16T(&p[0], &h[0], stride, len(p)/16, uint16(1)<<(len(p)%16)-1, len(out), &out[0])
	case haveF16AVX2():
		weightedSumF16TAVX2(&p[0], &h[0], len(h), stride, len(p)/16, len(p)%16, len(out), &out[0])
	default:
		return false
	}
	return true
}

// firstAboveSIMD scans x's whole blocks of 16: it returns the index of the
// first hit (x[i] > thr, or !(x[i] ≤ thr) with nan) and how many it
// scanned; a hit index equal to scanned means none.
func firstAboveSIMD(x []float32, thr float32, nan bool) (hit, scanned int) {
	blocks := len(x) / 16
	if !haveAVX512 || blocks == 0 {
		return 0, 0
	}
	if nan {
		return firstNLE(&x[0], blocks, thr), 16 * blocks
	}
	return firstGT(&x[0], blocks, thr), 16 * blocks
}

func quantizeQ8_0SIMD(src []float32, dst []byte) bool {
	blocks := len(src) / qk8_0
	if blocks == 0 {
		return false
	}
	_ = dst[blocks*q8_0Bytes-1]
	switch {
	case haveAVX512:
		quantizeQ8_0(&src[0], blocks, &dst[0])
	case haveF16AVX2():
		quantizeQ8_0AVX2(&src[0], blocks, &dst[0])
	default:
		return false
	}
	return true
}

// swigluSIMD runs the AVX-512 SwiGLU over whole blocks of 16 and returns
// how many elements it did.
func swigluSIMD(dst, gate, up []float32) int {
	blocks := len(dst) / 16
	if blocks == 0 {
		return 0
	}
	switch {
	case haveAVX512:
		swiglu(&dst[0], &gate[0], &up[0], blocks)
	case haveF16AVX2():
		swigluAVX2(&dst[0], &gate[0], &up[0], blocks)
	default:
		return 0
	}
	return 16 * blocks
}

func dotsF16VecSIMD(x []float32, h []uint16, stride int, out []float32) bool {
	if len(x)%64 != 0 || len(x) == 0 {
		return false
	}
	switch {
	case haveAVX512:
		dotsF16Vec(&x[0], &h[0], stride, len(out), len(x)/64, &out[0])
	case haveF16AVX2():
		dotsF16VecAVX2(&x[0], &h[0], stride, len(out), len(x)/64, &out[0])
	default:
		return false
	}
	return true
}

func weightedSumF16VecSIMD(p []float32, h []uint16, stride int, out []float32) bool {
	switch {
	case haveAVX512 && len(out)%16 == 0 && len(out) > 0:
		weightedSumF16Vec(&p[0], &h[0], stride, len(p), len(out)/16, &out[0])
	case haveF16AVX2() && len(out)%8 == 0 && len(out) > 0:
		weightedSumF16VecAVX2(&p[0], &h[0], stride, len(p), len(out)/8, &out[0])
	default:
		return false
	}
	return true
}
