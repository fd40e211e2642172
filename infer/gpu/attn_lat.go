package gpu

import "github.com/bonsai-chat/bonsai/shaders"

// latMaxPos is the longest decode sequence attention kind "lat" takes in
// one dispatch (attn_lat.wgsl: 32 positions per round, 4 rounds), and
// latLongMaxPos kind "latlong"'s (8 rounds: a thread holds 16 words each
// of K and V for 128-dim heads, and the workgroup memory is 29 KiB of the
// 32 lavapipe grants); past them, as split. Which is faster on a big GPU
// against the split path's three dispatches is for a measurement.
const (
	latMaxPos     = 128
	latLongMaxPos = 256
)

// latWG is attn_lat's workgroup size: 32 positions × 8 slices of a head.
const latWG = 256

// attnLat encodes a decode layer's waiting q/k norm+Rope and KV store p
// with its whole attention n as one attn_lat dispatch, one workgroup per
// query head (attnFused checked that the sequence and shapes fit), leaving
// q and k as attnHead leaves them.
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
