package cpu

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// attnJob computes attention for the (token, head) pairs [lo, hi), pair
// (g·n + i)·group + r being query head g·group + r of token i (group query
// heads per KV head g, n tokens). It follows llama.cpp's CPU graph
// without flash attention down to the order of its float operations, since a
// value rounded to f16 the other way moves the logits visibly:
//
//   - q is rounded to f16 (the vec-dot type of the f16 K cache) and the
//     scores are tinyBLAS's f16 dots (quant.DotsF16);
//   - softmax scales in f32, takes ggml's vectorised exp, sums the
//     exponentials of each 16 positions as _mm512_reduce_add_ps does and the
//     chunks in f64 (ggml_vec_soft_max_f32);
//   - the weights are rounded to f16 and meet V as tinyBLAS would
//     (quant.WeightedSumF16T over V stored by dimension, kvCache);
//   - except in a pass of one token: tinyBLAS takes only products of two
//     or more tokens, so a decode step's scores and outputs are
//     ggml_vec_dot_f16's (quant.DotsF16Vec, over K's rows and over V's
//     dimensions).
type attnJob struct {
	b        *Backend
	q, dst   *tensor
	layer    int
	a        infer.Attn
	flashPer int // query heads per flash share (flashShares)
}

func (j *attnJob) run(lo, hi, worker int) {
	b, a := j.b, j.a
	c := &b.kv
	if c.spec.Quantized() {
		j.flash(lo, hi, worker)
		return
	}
	group := a.Heads / a.KVHeads
	q16 := b.qf16[worker][:a.HeadDim]
	for pair := lo; pair < hi; pair++ {
		// Pairs run KV head by KV head, then row by row, so that a share
		// of consecutive pairs (several rows of a prompt) reads one head's
		// K and V while they are still in the core's cache.
		g, rest := pair/(b.n*group), pair%(b.n*group)
		i, h := rest/group, g*group+rest%group
		// Positions lo … Pos+i of the row's sequence are scored, those
		// before the window's first masked (windowStart).
		lo, masked := windowStart(a, b.pos(i))
		past := b.pos(i) + 1 - lo
		scores := b.scores[worker][:past]
		k, vByDim := c.kHead(j.layer, h/group, b.base(i)+lo), c.vHead(j.layer, h/group, b.base(i)+lo)
		out := j.dst.row(i)[h*a.HeadDim : (h+1)*a.HeadDim]

		quant.RoundF16s(q16, j.q.row(i)[h*a.HeadDim:(h+1)*a.HeadDim])
		if b.n == 1 || b.step(i) {
			quant.DotsF16Vec(q16, k, a.HeadDim, scores)
			maskScores(scores[:masked])
			quant.SoftmaxF16(scores, a.Scale)
			// ggml_vec_dot_f16 over llama.cpp's KV length padded to a
			// multiple of 256: the padding's weights are 0 and fall in
			// whole chunks of 64, so the dot runs over past rounded up to
			// 64 with nothing left over for its scalar tail.
			padded := b.scores[worker][:roundUp(past, 64)]
			clear(padded[past:])
			quant.DotsF16Vec(padded, vByDim, c.vStride, out)
			continue
		}
		quant.DotsF16(q16, k, a.HeadDim, scores)
		maskScores(scores[:masked])
		quant.SoftmaxF16(scores, a.Scale)
		quant.WeightedSumF16T(scores, vByDim, c.vStride, out)
	}
}

// windowStart is where attention at position p over an f16 cache starts,
// lo, and how many positions after lo it masks: those before a.First(p).
// llama.cpp masks the positions outside the window with −∞ and sums the
// whole cache in chunks from position 0 (where its cache holds the
// positions in order); starting at a multiple of 64 (a whole number of
// ggml's SIMD chunks and of the softmax's 16-score sums) with the positions
// up to the window masked keeps those chunks, and the masked weights add
// exactly 0.
func windowStart(a infer.Attn, p int) (lo, masked int) {
	first := a.First(p)
	lo = first &^ 63
	return lo, first - lo
}

// maskScores sets scores to −∞: softmax weighs them 0.
func maskScores(s []float32) {
	for t := range s {
		s[t] = float32(math.Inf(-1))
	}
}

// flashScratch is a worker's query in K's vec-dot type and its output
// accumulator.
type flashScratch struct {
	q8  []byte    // a share's query heads quantized to Q8_0 (a Q8_0 K)
	q16 []float32 // or rounded to f16 (an f16 K)
	acc []float32 // their VKQ: f32, or f16 values held in f32 (an f16 V)
	rot []float32 // a rotated head (q, or a K or V row being stored)
	v32 []float32 // a Q8_0 value row expanded (dequantize_row_q8_0)
}

// llama.cpp (llama_kv_cache, attn_rot_k/attn_rot_v) rotates what a
// quantized cache holds by an orthonormal Walsh–Hadamard transform, so that
// Q8_0's per-block scale meets values without outliers: with a quantized K
// whose head size is a multiple of 64, q and k by blocks of the largest
// power of two dividing the head size; with a quantized V, v by blocks of
// 64, and the attention output back by the same blocks (H·H = I). Each is
// ggml's FWHT: x·(1/√n) first, then the butterflies.

// rotationK is the block llama.cpp rotates q and a K of type t by; 0: none.
func rotationK(t infer.KVType, dim int) int {
	if !t.Quantized() || dim%64 != 0 {
		return 0
	}
	n := 64
	for dim%(2*n) == 0 {
		n *= 2
	}
	return n
}

// rotationV is the block llama.cpp rotates a V of type t by; 0: none.
func rotationV(t infer.KVType, dim int) int {
	if !t.Quantized() || dim%64 != 0 {
		return 0
	}
	return 64
}

// rotate sets dst to src with each block of n values rotated as
// ggml_compute_forward_fwht does (dst may equal src).
func rotate(dst, src []float32, n int) {
	scale := 1 / float32(math.Sqrt(float64(n)))
	for i, v := range src {
		dst[i] = v * scale
	}
	for c := 0; c < len(dst); c += n {
		fwht(dst[c : c+n])
	}
}

// flash is attention over a cache with a quantized K or V, in the order of
// ggml_compute_forward_flash_attn_ext_f16_one_chunk, which llama.cpp's CPU
// build runs for such a cache whatever the batch (its tiled and KV-split
// paths take f16 or f32 caches only): for each (token, head), q converted
// to K's vec-dot type, then the positions in order with an online softmax
// (glibc's expf, GCC's contraction of S·ms + vs into an FMA), V added
// into an f32 accumulator (ggml_vec_mad_f32) or, for an f16 V, an f16 one
// (ggml_vec_mad_f16 rounds after every FMA), divided by the sum at the end.
func (j *attnJob) flash(lo, hi, worker int) {
	b, a := j.b, j.a
	c := &b.kv
	group, per := a.Heads/a.KVHeads, j.flashPer
	dim, q8 := a.HeadDim, c.kRow
	sc := &b.flash[worker]
	v32 := sc.v32[:dim]
	vHalf := c.spec.V == infer.KVF16
	var m, sum [maxGroup]float32
	for u := lo; u < hi; u++ {
		i, h0 := u/(a.Heads/per), u%(a.Heads/per)*per
		// ggml's flash attention skips the positions its mask sets to −∞:
		// only the window's are visited.
		first := a.First(b.pos(i))
		past := b.pos(i) + 1 - first
		ks, vs := c.kRows(j.layer, h0/group, b.base(i)+first), c.vRows(j.layer, h0/group, b.base(i)+first)
		for r := range per {
			h := h0 + r
			q := j.q.row(i)[h*dim : (h+1)*dim]
			if c.kRot > 0 {
				rotate(sc.rot[:dim], q, c.kRot)
				q = sc.rot[:dim]
			}
			if c.spec.K == infer.KVQ8_0 {
				quant.QuantizeActivations(gguf.Q8_0, q, sc.q8[r*q8:(r+1)*q8])
			} else {
				quant.RoundF16s(sc.q16[r*dim:(r+1)*dim], q)
			}
			m[r], sum[r] = float32(math.Inf(-1)), 0
		}
		clear(sc.acc[:per*dim])
		var s [1]float32
		for t := range past {
			krow, vrow := ks[t*c.kRow:(t+1)*c.kRow], vs[t*c.vRow:(t+1)*c.vRow]
			if !vHalf {
				// One expansion of the value row for the heads sharing it.
				quant.DequantizeQ8_0(vrow, v32)
			}
			for r := range per {
				acc := sc.acc[r*dim : (r+1)*dim]
				if c.spec.K == infer.KVQ8_0 {
					s[0] = quant.DotQ8_0(krow, sc.q8[r*q8:(r+1)*q8])
				} else {
					quant.DotsF16Vec(sc.q16[r*dim:(r+1)*dim], unsafeHalves(krow), dim, s[:])
				}
				x := s[0] * a.Scale
				ms, w := float32(1), float32(1)
				if x > m[r] {
					ms, m[r] = quant.GlibcExpf(m[r]-x), x
					scaleF32(acc, ms)
					if vHalf {
						quant.RoundF16s(acc, acc)
					}
				} else {
					w = quant.GlibcExpf(x - m[r])
				}
				if vHalf {
					for d, v := range unsafeHalves(vrow) {
						acc[d] = quant.RoundF16(quant.FMA32(quant.F16ToF32(v), w, acc[d]))
					}
				} else {
					madF32(acc, v32, w)
				}
				sum[r] = float32(sum[r]*ms) + w
			}
		}
		for r := range per {
			inv := float32(0)
			if sum[r] != 0 {
				inv = 1 / sum[r]
			}
			h := h0 + r
			out := j.dst.row(i)[h*dim : (h+1)*dim]
			for d, v := range sc.acc[r*dim : (r+1)*dim] {
				out[d] = v * inv
			}
			if c.vRot > 0 {
				rotate(out, out, c.vRot)
			}
		}
	}
}

// maxGroup bounds the query heads one flash share takes together.
const maxGroup = 16

// flashShares sets how many query heads of a group a flash share takes
// (flashPer) and grows the workers' scratch to it, and returns the shares.
// A share takes the whole group, which reads each key and value row once
// for all its heads, unless that leaves threads idle: llama.cpp's flash
// attention runs a head's positions in order, so heads are all there is to
// split.
func (b *Backend) flashShares(a infer.Attn) int {
	group := a.Heads / a.KVHeads
	per := 1
	if group <= maxGroup && b.n*a.KVHeads >= b.qpool.Threads() {
		per = group
	}
	b.attn.flashPer = per
	c := &b.kv
	for w := range b.flash {
		sc := &b.flash[w]
		if len(sc.acc) < per*a.HeadDim {
			sc.acc = make([]float32, per*a.HeadDim)
			sc.q16 = make([]float32, per*a.HeadDim)
			sc.q8 = make([]byte, per*c.kRow)
		}
	}
	return b.n * a.Heads / per
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

func (b *Backend) Attention(dst, q infer.Tensor, layer int, a infer.Attn) {
	if !b.ok() {
		return
	}
	d, cq := b.tensorOf("Attention", dst), b.tensorOf("Attention", q)
	if d == nil || cq == nil {
		return
	}
	s := b.kv.spec
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.KVHeads != s.KVHeads || a.HeadDim != s.HeadDim ||
		layer < 0 || layer >= s.Layers || cq.cols != a.Heads*a.HeadDim || d.cols != cq.cols ||
		b.active(cq) != b.n || b.active(d) != b.n || d == cq || a.Window < 0 {
		b.fail(fmt.Errorf("%w: Attention of %s (%d×%d) into %s, layer %d, %+v, cache %+v", infer.ErrBadShape, cq.name, cq.rows, cq.cols, d.name, layer, a, s))
		return
	}
	if b.n == 1 && !s.Quantized() && b.useDecodeSweeps(a) {
		b.decode(cq, d, layer, a)
		return
	}
	b.attn = attnJob{b: b, q: cq, dst: d, layer: layer, a: a}
	if s.Quantized() {
		b.parallel(b.flashShares(a), 1, &b.attn)
		return
	}
	b.parallel(b.n*a.Heads, 1, &b.attn)
}
