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
//     (quant.WeightedSumF16);
//   - except in a pass of one token: tinyBLAS takes only products of two
//     or more tokens, so a decode step's scores and outputs are
//     ggml_vec_dot_f16's (quant.DotsF16Vec, quant.WeightedSumF16Vec).
type attnJob struct {
	b      *Backend
	q, dst *tensor
	layer  int
	a      infer.Attn
	// byDim, when set, is V of positions 0 … positions−1 stored by
	// dimension (transposeV).
	byDim     []uint16
	positions int
}

// transposeRows is the fewest rows of one sequence for which a pass copies
// V by dimension first. Each output of the probabilities · V product reads
// V at one dimension over all positions: down the position-major cache
// that is a column walk (rows 2 KiB apart on the 1.7B shape, which land in
// a few cache sets), over the copy a contiguous dot product
// (quant.WeightedSumF16T, the same sums to the bit). The copy costs one
// pass over V, which a prompt's many rows repay and a decoding token's
// one row does not.
const transposeRows = 16

// transposeV is a job over the KV heads: head g's dimensions of V at
// positions [0, n) into byDim, dimension by dimension.
type transposeV struct {
	src, dst    []uint16
	stride, dim int // src's elements per position; dim: per head
	n           int
}

func (t *transposeV) run(lo, hi, _ int) {
	for j := lo * t.dim; j < hi*t.dim; j++ {
		row := t.dst[j*t.n : (j+1)*t.n]
		for p := range row {
			row[p] = t.src[p*t.stride+j]
		}
	}
}

func (j *attnJob) run(lo, hi, worker int) {
	b, a := j.b, j.a
	stride := b.kv.stride
	group := a.Heads / a.KVHeads
	kc, vc := b.kv.k[j.layer], b.kv.v[j.layer]
	q16 := b.qf16[worker][:a.HeadDim]
	for pair := lo; pair < hi; pair++ {
		i, h := pair/a.Heads, pair%a.Heads
		dots, weightedSum := quant.DotsF16, quant.WeightedSumF16
		if b.n == 1 || b.step(i) {
			dots, weightedSum = quant.DotsF16Vec, quant.WeightedSumF16Vec
		}
		past := b.pos(i) + 1 // positions 0 … Pos+i of the row's sequence are visible
		scores := b.scores[worker][:past]
		kvOff := b.base(i)*stride + (h/group)*a.HeadDim

		quant.RoundF16s(q16, j.q.row(i)[h*a.HeadDim:(h+1)*a.HeadDim])
		dots(q16, kc[kvOff:], stride, scores)
		quant.SoftmaxF16(scores, a.Scale)
		out := j.dst.row(i)[h*a.HeadDim : (h+1)*a.HeadDim]
		if j.byDim != nil {
			quant.WeightedSumF16T(scores, j.byDim[(h/group)*a.HeadDim*j.positions:], j.positions, out)
		} else {
			weightedSum(scores, vc[kvOff:], stride, out)
		}
	}
}

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
	if !b.inRows && b.n >= transposeRows && !b.batch.Steps {
		// One sequence from position 0: its rows see at most positions
		// 0 … Pos+n−1.
		n := b.batch.Pos + b.n
		b.transpose = transposeV{src: b.kv.v[layer], dst: b.vByDim[:n*s.KVHeads*s.HeadDim], stride: b.kv.stride, dim: s.HeadDim, n: n}
		b.parallel(s.KVHeads, 1, &b.transpose)
		b.transpose = transposeV{}
		b.attn.byDim, b.attn.positions = b.vByDim, n
	}
	b.parallel(b.n*a.Heads, 1, &b.attn)
}
