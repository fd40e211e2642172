package quant

//go:generate sh -c "cd asm && go run . -out ../simd_amd64.s -stubs ../simd_stub_amd64.go -pkg quant"

import (
	"encoding/binary"
	"math"
	"os"

	"github.com/bonsai-chat/bonsai/gguf"
	"golang.org/x/sys/cpu"
)

// haveVNNI: the AVX-512 kernels need F, BW (byte masks) and VNNI
// (VPDPBUSD). BONSAI_NOSIMD=1 forces the portable kernels (for comparisons).
var haveVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI && os.Getenv("BONSAI_NOSIMD") == ""

// simdKernel returns the AVX-512 kernel for weight type t, or nil.
func simdKernel(t gguf.Type) func(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	if !haveVNNI {
		return nil
	}
	switch t {
	case gguf.Q1_0:
		return q1_0SIMD
	}
	return nil
}

// simdRepack builds the kernel's weight layout for m, or nil if m's type
// runs on the file's layout.
func simdRepack(m *Matrix) []byte {
	switch m.Type {
	case gguf.Q1_0:
		return repackQ1_0(m)
	}
	return nil
}

// planes is Q8_0 activations re-laid for the kernels, per tile of 8
// tokens:
//
//	qs   [N/4 groups][8 tokens] 4 bytes   the quants, a token's 4-byte groups interleaved
//	negq [N/32 blocks][8 tokens] int32    −Σq of each 32-block
//	dk   [N/32 blocks][8 tokens] float32  the block's d (from its f16)
type planes struct {
	qs, negq, dk []byte
}

func (a *Activations) preparePlanes() {
	if !haveVNNI || a.Type != gguf.Q8_0 {
		a.planes = nil
		return
	}
	if a.planes == nil {
		a.planes = &planes{}
	}
	tiles := (a.Tokens + tileTokens - 1) / tileTokens
	p := a.planes
	p.qs = grow(p.qs, tiles*tileTokens*a.N)
	p.negq = grow(p.negq, tiles*tileTokens*a.N/8) // 4 bytes per 32 activations
	p.dk = grow(p.dk, tiles*tileTokens*a.N/8)
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

const tileTokens = 8

func (a *Activations) fillPlanes(t int) {
	p := a.planes
	if p == nil {
		return
	}
	tile, lane := t/tileTokens, t%tileTokens
	src := a.Token(t)
	qs := p.qs[tile*tileTokens*a.N:]
	negq := p.negq[tile*tileTokens*a.N/8:]
	dk := p.dk[tile*tileTokens*a.N/8:]
	for b := 0; b < a.N/qk8_0; b++ {
		blk := src[b*q8_0Bytes:]
		var sum int32
		for _, q := range blk[2:q8_0Bytes] {
			sum += int32(int8(q))
		}
		binary.LittleEndian.PutUint32(negq[4*(b*tileTokens+lane):], uint32(-sum))
		binary.LittleEndian.PutUint32(dk[4*(b*tileTokens+lane):], math.Float32bits(f16at(blk, 0)))
		for g := 0; g < 8; g++ {
			copy(qs[4*((8*b+g)*tileTokens+lane):][:4], blk[2+4*g:])
		}
	}
}

// q1_0SIMD runs the AVX-512 Q1_0 kernels over rows [r0, r1) (r0 a multiple
// of 16) and tokens [t0, t1).
func q1_0SIMD(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	blocks := m.Cols / qk1_0
	groupBytes := blocks * q1PackedBlock
	p := a.planes
	var scratch [packRows * tileTokens]float32
	for g0 := r0; g0 < r1; g0 += packRows {
		w := &m.packed[g0/packRows*groupBytes]
		full := g0+packRows <= m.Rows
		for t := t0; t < t1; {
			tile, lane := t/tileTokens, t%tileTokens
			n := kernelTokens(lane, t1-t)
			qs := &p.qs[tile*tileTokens*a.N+4*lane]
			negq := &p.negq[tile*tileTokens*a.N/8+4*lane]
			dk := &p.dk[tile*tileTokens*a.N/8+4*lane]
			out, ldy := &y[t*m.Rows+g0], 4*m.Rows
			if !full {
				out, ldy = &scratch[0], 4*packRows
			}
			switch n {
			case 8:
				q1_0x16t8(w, blocks, qs, negq, dk, out, ldy)
			case 4:
				q1_0x16t4(w, blocks, qs, negq, dk, out, ldy)
			case 2:
				q1_0x16t2(w, blocks, qs, negq, dk, out, ldy)
			default:
				q1_0x16t1(w, blocks, qs, negq, dk, out, ldy)
			}
			if !full {
				for i := 0; i < n; i++ {
					copy(y[(t+i)*m.Rows+g0:(t+i+1)*m.Rows], scratch[i*packRows:])
				}
			}
			t += n
		}
	}
}

// kernelTokens picks the widest kernel (8, 4, 2 or 1 tokens) that stays
// inside the current tile of 8 and the remaining tokens.
func kernelTokens(lane, left int) int {
	switch {
	case lane%8 == 0 && left >= 8:
		return 8
	case lane%4 == 0 && left >= 4:
		return 4
	case lane%2 == 0 && left >= 2:
		return 2
	}
	return 1
}
