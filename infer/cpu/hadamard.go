package cpu

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// Hadamard rotates each active row of x into dst (infer.HybridOps): the
// optional head regroup P, the signs s before or after, and the block
// Walsh–Hadamard transform H, as
//
//	dst = H(s ⊙ P(x))     or, with r.SignsAfter,     dst = s ⊙ H(P(x)).
//
// Blocks are independent once P has gathered their inputs, so the work is
// split over (row, block) pairs.
func (b *Backend) Hadamard(dst, x infer.Tensor, r infer.Rotation) {
	if !b.ok() {
		return
	}
	d, cx := b.tensorOf("Hadamard", dst), b.tensorOf("Hadamard", x)
	if d == nil || cx == nil {
		return
	}
	n := cx.cols
	bad := func(why string) {
		b.fail(fmt.Errorf("%w: Hadamard of %s (%d×%d) into %s (%d×%d), block %d: %s", infer.ErrBadShape, cx.name, cx.rows, cx.cols, d.name, d.rows, d.cols, r.Block, why))
	}
	switch {
	case r.Block < 1 || r.Block&(r.Block-1) != 0:
		bad("the block is not a power of two")
		return
	case n%r.Block != 0:
		bad("the width is not a multiple of the block")
		return
	case d.cols != n || b.active(d) != b.active(cx):
		bad("dst and x differ in shape")
		return
	}
	var signs []float32
	if r.Signs != nil {
		cw := b.weightOf("Hadamard", r.Signs)
		if cw == nil {
			return
		}
		if cw.typ != gguf.F32 || cw.rows != 1 || cw.cols != n {
			bad(fmt.Sprintf("the signs %s are %v %s, want %d F32 values", cw.name, cw.shape, cw.typ, n))
			return
		}
		signs = f32s(cw.data)
	}
	g := r.Regroup
	if g.HeadDim > 0 && (g.KHeads <= 0 || n%(g.HeadDim*g.KHeads) != 0) {
		bad(fmt.Sprintf("%d columns do not hold heads of %d values in a multiple of %d key heads", n, g.HeadDim, g.KHeads))
		return
	}
	rows := b.active(cx)
	src := cx.data[:rows*n]
	if g.HeadDim > 0 && d == cx {
		// P moves values across blocks: gather from a copy, since the
		// blocks written first would otherwise be read afterwards.
		if len(b.hadamardSrc) < len(src) {
			b.hadamardSrc = make([]float32, len(src))
		}
		copy(b.hadamardSrc, src)
		src = b.hadamardSrc[:len(src)]
	}
	b.hadamard = hadamardJob{
		src: src, dst: d.data[:rows*n], cols: n, block: r.Block,
		signs: signs, after: r.SignsAfter, regroup: g,
		scale: float32(1 / math.Sqrt(float64(r.Block))),
	}
	units := rows * (n / r.Block)
	b.parallel(units, max(1, hadamardGrain/r.Block), &b.hadamard)
	b.hadamard = hadamardJob{}
}

// hadamardGrain is the fewest values a share of the pool transforms: a
// 1024-block costs a few microseconds, about what waking a worker does.
const hadamardGrain = 8192

// hadamardJob transforms units [lo, hi), unit u being block u mod
// (cols/block) of row u div (cols/block).
type hadamardJob struct {
	src, dst    []float32
	cols, block int
	signs       []float32 // nil: no signs
	after       bool      // signs after the transform
	regroup     infer.HeadOrder
	scale       float32 // 1/√block
}

func (j *hadamardJob) run(lo, hi, _ int) {
	per := j.cols / j.block
	for u := lo; u < hi; u++ {
		row, c0 := u/per, (u%per)*j.block
		src := j.src[row*j.cols : (row+1)*j.cols]
		out := j.dst[row*j.cols+c0 : row*j.cols+c0+j.block]
		if j.regroup.HeadDim > 0 {
			gatherGrouped(out, src, c0, j.regroup)
		} else {
			copy(out, src[c0:c0+j.block])
		}
		var s []float32
		if j.signs != nil {
			s = j.signs[c0 : c0+j.block]
		}
		if s != nil && !j.after {
			for i := range out {
				out[i] *= s[i]
			}
		}
		fwht(out)
		if s != nil && j.after {
			for i := range out {
				out[i] *= j.scale * s[i]
			}
		} else {
			for i := range out {
				out[i] *= j.scale
			}
		}
	}
}

// gatherGrouped fills out with columns c0 … c0+len(out)−1 of P(src): the
// heads of src in llama.cpp's tiled V-head order (head r·nk + k) reordered to
// grouped order (head k·rep + r), rep = heads/nk.
func gatherGrouped(out, src []float32, c0 int, g infer.HeadOrder) {
	hd, nk := g.HeadDim, g.KHeads
	rep := len(src) / hd / nk
	for c := c0; c < c0+len(out); {
		head, off := c/hd, c%hd
		k, r := head/rep, head%rep
		from := (r*nk+k)*hd + off
		run := min(hd-off, c0+len(out)-c)
		copy(out[c-c0:c-c0+run], src[from:from+run])
		c += run
	}
}

// fwht is the unnormalised Walsh–Hadamard transform of x in place, in
// natural (Sylvester) order: x ← H x, H[i][j] = (−1)^popcount(i&j), by
// log₂(len(x)) stages of butterflies (a, b) → (a+b, a−b), two stages per
// pass over x where it can (the same additions in the same order as one
// stage at a time, so the same result, with half the passes).
func fwht(x []float32) {
	n, h := len(x), 1
	for ; 4*h <= n; h *= 4 {
		for i := 0; i < n; i += 4 * h {
			x0 := x[i : i+h : i+h]
			x1 := x[i+h : i+2*h : i+2*h][:len(x0)]
			x2 := x[i+2*h : i+3*h : i+3*h][:len(x0)]
			x3 := x[i+3*h : i+4*h : i+4*h][:len(x0)]
			for j := range x0 {
				a, b := x0[j]+x1[j], x0[j]-x1[j]
				c, d := x2[j]+x3[j], x2[j]-x3[j]
				x0[j], x1[j], x2[j], x3[j] = a+c, b+d, a-c, b-d
			}
		}
	}
	if 2*h == n {
		a, b := x[:h:h], x[h:][:h]
		for j := range a {
			u, v := a[j], b[j]
			a[j], b[j] = u+v, u-v
		}
	}
}
