package cpu

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/infer"
)

// attnJob computes attention for the (token, head) pairs [lo, hi), pair
// i·Heads+h being query head h of token i. It follows llama.cpp's CPU graph
// without flash attention: the query is rounded to f16 (the vec-dot type of
// the f16 K cache), scores are scaled and soft-maxed in f32, and the weights
// are rounded to f16 again before they meet V.
type attnJob struct {
	b      *Backend
	q, dst *tensor
	layer  int
	a      infer.Attn
}

func (j *attnJob) run(lo, hi, worker int) {
	b, a := j.b, j.a
	width := a.KVHeads * a.HeadDim
	group := a.Heads / a.KVHeads
	kc, vc := b.kv.k[j.layer], b.kv.v[j.layer]
	q16, acc := b.qf16[worker][:a.HeadDim], b.accum[worker][:a.HeadDim]
	for pair := lo; pair < hi; pair++ {
		i, h := pair/a.Heads, pair%a.Heads
		past := b.batch.Pos + i + 1 // positions 0 … Pos+i are visible
		scores := b.scores[worker][:past]
		kvOff := (h / group) * a.HeadDim

		for d, x := range j.q.row(i)[h*a.HeadDim : (h+1)*a.HeadDim] {
			q16[d] = roundF16(x)
		}
		maxScore := float32(math.Inf(-1))
		for t := range scores {
			k := kc[t*width+kvOff : t*width+kvOff+a.HeadDim]
			s := dotF16(q16, k) * a.Scale
			scores[t] = s
			maxScore = max(maxScore, s)
		}
		var sum float64
		for t, s := range scores {
			e := float32(math.Exp(float64(s - maxScore)))
			scores[t] = e
			sum += float64(e)
		}
		inv := float32(1 / sum)

		clear(acc)
		for t, e := range scores {
			p := roundF16(e * inv)
			v := vc[t*width+kvOff : t*width+kvOff+a.HeadDim]
			for d := range acc {
				acc[d] += p * halfToFloat[v[d]]
			}
		}
		copy(j.dst.row(i)[h*a.HeadDim:(h+1)*a.HeadDim], acc)
	}
}

// dotF16 is q·k for f16 keys, with four partial sums so the additions
// overlap. (llama.cpp sums in 16 SIMD lanes; the order differs only by
// rounding, and exactness here was measured not to move the logits of the
// parity models.)
func dotF16(q []float32, k []uint16) float32 {
	k = k[:len(q)]
	var s0, s1, s2, s3 float32
	d := 0
	for ; d+4 <= len(q); d += 4 {
		s0 += q[d] * halfToFloat[k[d]]
		s1 += q[d+1] * halfToFloat[k[d+1]]
		s2 += q[d+2] * halfToFloat[k[d+2]]
		s3 += q[d+3] * halfToFloat[k[d+3]]
	}
	for ; d < len(q); d++ {
		s0 += q[d] * halfToFloat[k[d]]
	}
	return (s0 + s1) + (s2 + s3)
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
	b.pool.parallel(b.n*a.Heads, 1, &b.attn)
}
