package cpu

import (
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// decodeJob is a one-token pass's attention over an f16 cache, in three
// sweeps that keep every thread busy whatever the number of heads (one
// (token, head) pair per share left a thread idle per layer with fewer
// heads than threads, and a head's whole context on one thread) and read
// each block of K and V from memory once for all the query heads that share
// its KV head:
//
//  1. scores, by (KV head, block of positions): each query head of the
//     group against the block's keys;
//  2. the softmax, by query head;
//  3. the outputs, by (KV head, block of dimensions): each query head's
//     weights against the block's value dimensions.
//
// Every score and every output is the ggml_vec_dot_f16 of the same operands
// attnJob computes for a decode step, so the result is the same to the bit.
type decodeJob struct {
	b      *Backend
	q, dst *tensor
	layer  int
	a      infer.Attn
	sweep  int // 0: scores, 1: softmax, 2: outputs
	past   int // positions scored: base … base+past−1
	masked int // the first of them, before the window (windowStart)
	base   int
	blocks int // position blocks per KV head (sweep 0)
}

const (
	decodePosBlock = 256 // positions per score share: 64 KiB of keys at HeadDim 128
	decodeDimBlock = 16  // value dimensions per output share: 16 runs of the context
)

func (j *decodeJob) run(lo, hi, _ int) {
	b, a := j.b, j.a
	c := &b.kv
	dim, group := a.HeadDim, a.Heads/a.KVHeads
	stride := c.spec.Context + vSlack
	padded := roundUp(j.past, 64)
	for u := lo; u < hi; u++ {
		switch j.sweep {
		case 0:
			g, t0 := u/j.blocks, u%j.blocks*decodePosBlock
			t1 := min(t0+decodePosBlock, j.past)
			k := c.kHead(j.layer, g, j.base)[t0*dim:]
			for h := g * group; h < (g+1)*group; h++ {
				quant.DotsF16Vec(b.decQ[h*dim:(h+1)*dim], k, dim, b.decScores[h*stride+t0:h*stride+t1])
			}
		case 1:
			s := b.decScores[u*stride:]
			maskScores(s[:j.masked])
			quant.SoftmaxF16(s[:j.past], a.Scale)
			// ggml_vec_dot_f16 over llama.cpp's KV length padded to a
			// multiple of 256 (see attnJob).
			clear(s[j.past:padded])
		case 2:
			per := (dim + decodeDimBlock - 1) / decodeDimBlock
			g, d0 := u/per, u%per*decodeDimBlock
			d1 := min(d0+decodeDimBlock, dim)
			v := c.vHead(j.layer, g, j.base)[d0*c.vStride:]
			for h := g * group; h < (g+1)*group; h++ {
				quant.DotsF16Vec(b.decScores[h*stride:h*stride+padded], v, c.vStride, j.dst.row(0)[h*dim+d0:h*dim+d1])
			}
		}
	}
}

// decode runs decodeJob's sweeps for the pass's one token.
func (b *Backend) decode(q, dst *tensor, layer int, a infer.Attn) {
	c := &b.kv
	dim := a.HeadDim
	stride := c.spec.Context + vSlack
	if n := a.Heads * stride; len(b.decScores) < n {
		b.decScores = make([]float32, n) // once per cache size: grown, never shrunk
	}
	if n := a.Heads * dim; len(b.decQ) < n {
		b.decQ = make([]float32, n)
	}
	// q rounded to f16, the vec-dot type of the f16 cache.
	quant.RoundF16s(b.decQ[:a.Heads*dim], q.row(0)[:a.Heads*dim])
	j := &b.dec
	lo, masked := windowStart(a, b.pos(0))
	*j = decodeJob{b: b, q: q, dst: dst, layer: layer, a: a, past: b.pos(0) + 1 - lo, masked: masked, base: b.base(0) + lo}
	j.blocks = (j.past + decodePosBlock - 1) / decodePosBlock
	b.parallel(a.KVHeads*j.blocks, 1, j)
	j.sweep = 1
	b.parallel(a.Heads, 1, j)
	j.sweep = 2
	b.parallel(a.KVHeads*((dim+decodeDimBlock-1)/decodeDimBlock), 1, j)
	*j = decodeJob{}
}

// useDecodeSweeps says whether a decode step takes the sweeps: when its
// query heads cannot keep the threads busy (two shares each at least) and
// the context is long enough to split. Otherwise the (token, head) pairs
// balance already, and at depth 4096 in the 1.7B's shape on 2 threads the
// sweeps measured no faster (0.487 against 0.485 ms a layer, best of 6),
// while their three dispatches cost a shallow step more.
func (b *Backend) useDecodeSweeps(a infer.Attn) bool {
	if forceDecodeSweeps != 0 {
		return forceDecodeSweeps > 0
	}
	lo, _ := windowStart(a, b.pos(0))
	return a.Heads < 2*b.qpool.Threads() && b.pos(0)+1-lo > decodePosBlock
}

// forceDecodeSweeps overrides useDecodeSweeps for tests: 1 always, −1
// never, 0 as it decides.
var forceDecodeSweeps int
