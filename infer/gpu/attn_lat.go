package gpu

import (
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
)

// latLongMaxPos is the longest decode sequence attn_lat takes in one
// dispatch (8 rounds of 32 positions: a thread holds 16 words each of K
// and V for 128-dim heads, and the workgroup memory is 29 KiB of the 32
// lavapipe grants); past it the split passes run. On the H200 attn_lat
// decoded the 8B at 277 tok/s against the split passes' 229 (1.7B: 440
// against 350; chained greedy 354 against 306 and 598 against 537); its
// pipelines, one per power of two of rounds, compile on first use (~0.2 s
// each), as the split passes' do.
const latLongMaxPos = 256

// latWG is attn_lat's workgroup size: 32 positions × 8 slices of a head.
const latWG = 256

// attnLat encodes a decode layer's waiting q/k norm+Rope and KV store p
// with its whole attention n as one attn_lat dispatch, one workgroup per
// query head (attnFused checked that the sequence and shapes fit), leaving
// q and k as attnQK leaves them.
func (b *Backend) attnLat(n *node, p value) {
	seq := b.batch.Pos + 1
	// rounds of 32 positions: a power of two, so that few pipelines cover
	// every length
	rounds := 1
	for 32*rounds < seq {
		rounds *= 2
	}
	pr, ok := b.beginPrologue(n, p)
	if !ok {
		return
	}
	b.dispatchPrologue(pr, "attn_lat", "attnlat", (p.layer<<1|boolInt(pr.q8))<<4|rounds, func() map[string]shaders.Const {
		return map[string]shaders.Const{"R": shaders.U32(rounds)}
	})
}

var _ infer.Warming = (*Backend)(nil)

// WarmPositions are the decode positions at which the attention kernels
// change: attn_lat's rounds of 32 positions double (a pipeline each) and,
// past latMax, the split passes take over (or, where attn_lat cannot take
// the model, past one split of 32 positions).
func (b *Backend) WarmPositions() []int {
	ps := []int{32}
	for p := 64; p < b.latMax; p *= 2 {
		ps = append(ps, p)
	}
	if b.latMax > 32 {
		ps = append(ps, b.latMax)
	}
	return ps
}

// WarmBatches are the prompt batches at which the prompt kernels change:
// the kernel table's rows column takes up to rowsMaxTokens, its prompt
// column more; a recurrent network's DeltaNet runs per token below
// deltaChunkMin and chunked from it; the other prompt kernels are
// specialised on the largest batch, not on the batch's size.
func (b *Backend) WarmBatches() []int {
	if b.rec == nil {
		return []int{2, rowsMaxTokens + 1}
	}
	return []int{2, rowsMaxTokens + 1, b.deltaChunkMin}
}
