package cpu

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/infer"
)

// attnJob computes attention for the (token, head) pairs [lo, hi), pair
// i·Heads+h being query head h of token i. It follows llama.cpp's CPU graph
// without flash attention, down to the order of its float operations, since
// one rounding to f16 decided differently moves the logits visibly:
//
//   - q is rounded to f16 (the vec-dot type of the f16 K cache) and each
//     score is tinyBLAS's f16 dot on AVX-512: 16 lanes of fused
//     multiply-adds, then _mm512_reduce_add_ps's pairwise tree;
//   - softmax scales in f32, sums the exponentials of each 16 positions as
//     that tree and the chunks in f64 (ggml_vec_soft_max_f32);
//   - the weights are rounded to f16 and meet V in the same 16-lane order
//     (position t feeds lane t mod 16).
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
	q16 := b.qf16[worker][:a.HeadDim]
	lanes := b.accum[worker][:16*a.HeadDim] // 16 lanes per output value
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
			s := dotF16(q16, kc[t*width+kvOff:t*width+kvOff+a.HeadDim]) * a.Scale
			scores[t] = s
			maxScore = max(maxScore, s)
		}
		var sum float64
		var chunk [16]float32
		for c := 0; c < len(scores); c += 16 {
			clear(chunk[:])
			for l := range min(16, len(scores)-c) {
				e := float32(math.Exp(float64(scores[c+l] - maxScore)))
				scores[c+l] = e
				chunk[l] = e
			}
			sum += float64(reduce16(&chunk))
		}
		inv := float32(1 / sum)

		clear(lanes)
		for t, e := range scores {
			p := roundF16(e * inv)
			v := vc[t*width+kvOff : t*width+kvOff+a.HeadDim]
			l := t % 16
			for d := range v {
				acc := &lanes[d*16+l]
				*acc = fma32(p, halfToFloat[v[d]], *acc)
			}
		}
		out := j.dst.row(i)[h*a.HeadDim : (h+1)*a.HeadDim]
		for d := range out {
			out[d] = reduce16((*[16]float32)(lanes[d*16 : d*16+16]))
		}
	}
}

// dotF16 is the f16 dot product of q (already f16 values) and k as
// tinyBLAS computes it with AVX-512.
func dotF16(q []float32, k []uint16) float32 {
	var acc [16]float32
	for d, x := range q {
		acc[d%16] = fma32(x, halfToFloat[k[d]], acc[d%16])
	}
	return reduce16(&acc)
}

// reduce16 adds 16 lanes as _mm512_reduce_add_ps does: halves, quarters,
// then pairs.
func reduce16(l *[16]float32) float32 {
	var s8 [8]float32
	for i := range s8 {
		s8[i] = l[i+8] + l[i]
	}
	var s4 [4]float32
	for i := range s4 {
		s4[i] = s8[i+4] + s8[i]
	}
	return (s4[0] + s4[2]) + (s4[1] + s4[3])
}

// fma32 is a·b+c rounded once to f32 (the product is exact in f64).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
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
