package gpu

import (
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
)

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

// attnLat encodes a decode layer's deferred q/k norm+Rope and KV store
// with its whole attention as one attn_lat dispatch, one workgroup per
// query head, for sequences of up to b.latMax positions; q and k are left
// un-rotated with a lazy norm+Rope each, as attnHead leaves them. It
// reports false, encoding nothing, for shapes or lengths it does not take.
func (b *Backend) attnLat(dst *tensor, p *pendingQK, a infer.Attn) bool {
	seq := b.batch.Pos + 1
	if b.latMax == 0 || seq > b.latMax || (a.HeadDim != 64 && a.HeadDim != 128) ||
		int(b.d.Limits.MaxComputeInvocationsPerWorkgroup) < latWG || !b.takesPrologue(dst, p, a) {
		return false
	}
	s := b.kv.spec
	q, k, v := p.q, p.k, p.v
	kc, vc, off := b.kvBind(p.layer)
	if off%4 != 0 {
		return false
	}
	// rounds of 32 positions: a power of two, so that few pipelines cover
	// every length
	rounds := 1
	for 32*rounds < seq {
		rounds *= 2
	}
	b.flushMatVec()
	b.flushNorms()
	b.flushNormRopes()
	b.overwrite(dst)
	q8 := b.xqOK() && b.d.Limits.MaxStorageBuffersPerShaderStage >= 11
	if q8 {
		if err := b.xqBuffers(dst); err != nil {
			b.fail(err)
			return true
		}
	}
	if b.err != nil {
		return true
	}
	r := p.pq.r
	key := opKey{kind: "attnlat", a: q, b: k, c: v, d: p.pq.norm.w, e: p.pk.norm.w, g: a, i: (p.layer<<1|boolInt(q8))<<4 | rounds, f: p.pq.norm.eps}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		kern, err := b.d.kernel("attn_lat", map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "QPG": shaders.U32(a.Heads / a.KVHeads), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(s.KVHeads * s.HeadDim), "LAYER_OFF": shaders.U32(off), "SCALE": shaders.F32(a.Scale),
			"DIMS": shaders.U32(r.Dims), "QEPS": shaders.F32(p.pq.norm.eps), "KEPS": shaders.F32(p.pk.norm.eps),
			"NRWG": shaders.U32(normRopeThreads(a.HeadDim)), "CTX": shaders.U32(s.Context), "R": shaders.U32(rounds),
			"Q8": shaders.Flag(q8)})
		bufs := []binding{whole(b.batchBuf), whole(p.pq.norm.w.chunks[0].buf), whole(p.pk.norm.w.chunks[0].buf), whole(p.pq.table),
			whole(q.buf), whole(k.buf), whole(v.buf), kc, vc, whole(dst.buf)}
		if q8 {
			bufs = append(bufs, whole(dst.xq), whole(dst.xqSum))
		}
		return kern, bufs, err
	})
	b.dispatch(o, a.Heads, 1, 1)
	pq, pk := p.pq, p.pk
	b.lazies = append(b.lazies, &lazy{dst: q, nr: &pq}, &lazy{dst: k, nr: &pk})
	if q8 {
		b.lazies = append(b.lazies, &lazy{dst: dst, quant: true})
	}
	return true
}
