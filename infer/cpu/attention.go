package cpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// attnJob computes attention for the (token, head) pairs [lo, hi), pair
// i·Heads+h being query head h of token i. It follows llama.cpp's CPU graph
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
	b      *Backend
	q, dst *tensor
	layer  int
	a      infer.Attn
}

func (j *attnJob) run(lo, hi, worker int) {
	b, a := j.b, j.a
	c := &b.kv
	group := a.Heads / a.KVHeads
	q16 := b.qf16[worker][:a.HeadDim]
	for pair := lo; pair < hi; pair++ {
		i, h := pair/a.Heads, pair%a.Heads
		past := b.pos(i) + 1 // positions 0 … Pos+i of the row's sequence are visible
		scores := b.scores[worker][:past]
		k, vByDim := c.kHead(j.layer, h/group, b.base(i)), c.vHead(j.layer, h/group, b.base(i))
		out := j.dst.row(i)[h*a.HeadDim : (h+1)*a.HeadDim]

		quant.RoundF16s(q16, j.q.row(i)[h*a.HeadDim:(h+1)*a.HeadDim])
		if b.n == 1 || b.step(i) {
			quant.DotsF16Vec(q16, k, a.HeadDim, scores)
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
		quant.SoftmaxF16(scores, a.Scale)
		quant.WeightedSumF16T(scores, vByDim, c.vStride, out)
	}
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
		b.active(cq) != b.n || b.active(d) != b.n || d == cq {
		b.fail(fmt.Errorf("%w: Attention of %s (%d×%d) into %s, layer %d, %+v, cache %+v", infer.ErrBadShape, cq.name, cq.rows, cq.cols, d.name, layer, a, s))
		return
	}
	b.attn = attnJob{b: b, q: cq, dst: d, layer: layer, a: a}
	b.parallel(b.n*a.Heads, 1, &b.attn)
}
