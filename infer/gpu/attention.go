package gpu

import (
	"errors"
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
)

// Attention: the fused decode kernels (attn_lat, attn_qk) and the split
// passes.

// Attention is recorded: fuse gives it the KV store waiting for it, with
// q's and k's norm+RoPE, where the fused kernel n.fused can take them
// (attnPrologue); otherwise it is encoded as it is after the store.
func (b *Backend) Attention(dstT, qT infer.Tensor, layer int, a infer.Attn) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, q := b.asTensor("Attention dst", dstT), b.asTensor("Attention q", qT)
	if dst == nil || q == nil {
		return
	}
	n := node{op: opAttn, dst: dst, x: q, layer: layer, attn: a}
	n.fused, n.fusedQ8 = b.attnFused(dst, q, layer, a)
	// the split passes' last (attn_sum) rounds dst for the output
	// projection
	n.q8 = !(b.n == 1 && b.splits == 1 && !b.noFuse) && b.attnSumQ8(a)
	b.record(n)
}

// attnFused is the fused attention that would take a waiting KV store
// for an attention of q into dst at layer, and whether it writes dst's
// rounding: attn_lat or (over several splits) attn_qk, where the device,
// the pass and the shapes allow (0: none).
func (b *Backend) attnFused(dst, q *tensor, layer int, a infer.Attn) (attnKind, bool) {
	if b.kv == nil || b.n != 1 || b.noFuse || b.rows {
		return 0, false
	}
	s := b.kv.spec
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.KVHeads != s.KVHeads || a.HeadDim != s.HeadDim ||
		q.cols != a.Heads*a.HeadDim || dst.cols != q.cols || dst == q || layer < 0 || layer >= s.Layers || a.Window < 0 {
		return 0, false
	}
	maxInv := int(b.d.Limits.MaxComputeInvocationsPerWorkgroup)
	// attn_lat: its Q8_0 epilogue needs xq on and room for its buffers
	// and the lookup table (12 storage bindings in all)
	q8Room := b.xqOK() && b.d.Limits.MaxStorageBuffersPerShaderStage >= 12
	_, _, off := b.kvBind(layer)
	seq := b.batch.Pos + 1
	// attn_lat sees every position: a sliding window leaves it once the
	// sequence outgrows the window (gemma3's windows, 512 and 1024, are
	// longer than latMax anyway)
	inWindow := a.Window == 0 || seq <= a.Window
	if b.latMax != 0 && seq <= b.latMax && inWindow && (a.HeadDim == 64 || a.HeadDim == 128) && maxInv >= latWG && off%4 == 0 {
		return attnLat, q8Room
	}
	if _, ok := b.attnParams(a); ok && b.splits > 1 {
		return attnQK, b.attnSumQ8(a)
	}
	return 0, false
}

// encodeAttention encodes attention n: with the waiting store s, fused as
// n.fused; otherwise over the cache as the store left it.
func (b *Backend) encodeAttention(at *node, store value) {
	if b.err != nil {
		return
	}
	if store.kind == vQKStore {
		switch at.fused {
		case attnLat:
			b.attnLat(at, store)
		case attnQK:
			b.attnQK(at, store)
		}
		return
	}
	dst, q, layer, a := at.dst, at.x, at.layer, at.attn
	if b.kv == nil {
		b.fail(errors.New("gpu: Attention before NewKVCache"))
		return
	}
	s := b.kv.spec
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.KVHeads != s.KVHeads || a.HeadDim != s.HeadDim ||
		q.cols != a.Heads*a.HeadDim || dst.cols != q.cols || layer < 0 || layer >= s.Layers || dst == q || a.Window < 0 {
		b.shapeErr("Attention: %+v on q %d cols, cache %+v, layer %d", a, q.cols, s, layer)
		return
	}
	qpg := a.Heads / a.KVHeads
	// a prompt pass, and a pass over rows of several sequences, takes the
	// 16-position tiles of attn_tile.wgsli, one token the split passes of
	// attn_blk.wgsli
	stats, pv := "attn_stats", "attn_pv"
	wg, ok := b.attnParams(a)
	tile := 0
	if b.n > 1 || b.rows {
		stats, pv = "attn_stats_rows", "attn_pv_rows"
		wg, tile, ok = b.attnTileParams(a)
	}
	if !ok {
		b.fail(fmt.Errorf("gpu: attention with head_dim %d and %d query heads per kv head: %w", a.HeadDim, qpg, ErrUnsupported))
		return
	}
	rows := min(q.rows, dst.rows)
	n := min(rows, b.n)
	if !b.attnBuffers(q, a, rows, false) {
		return
	}
	kvd := s.KVHeads * s.HeadDim
	kc, vc, off := b.kvBind(layer)
	defs := func() map[string]shaders.Const {
		d := map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "KVHEADS": shaders.U32(a.KVHeads), "QPG": shaders.U32(qpg), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(kvd), "QROWS": shaders.U32(rows), "LAYER_OFF": shaders.U32(off),
			"SCALE": shaders.F32(a.Scale), "WIN": shaders.U32(a.Window), "WG": shaders.U32(wg)}
		if tile > 0 {
			d["TILE"] = shaders.U32(tile)
		} else {
			d["RT"], d["RDN"] = shaders.U32(1), shaders.U32(attnRDN(qpg, wg))
		}
		return b.kvDefs(d, layer)
	}
	// With one split (decode over ≤ 32 positions) attn_one does exactly
	// the work of attn_stats and attn_pv on the same workgroups, without
	// the two launches between them and attn_sum. It is not used for
	// longer sequences: at 200 positions one workgroup per kv head took
	// 42 µs on the H200 against 26 µs for the split passes at 600.
	if b.n == 1 && b.splits == 1 && !b.noFuse && !b.rows {
		one := b.prepared(opKey{kind: "attnone", a: q, b: a, c: dst, i: layer}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("attn_one", defs())
			return k, []binding{whole(b.batchBuf), whole(q.buf), kc, vc, whole(dst.buf)}, err
		})
		b.dispatch(one, a.KVHeads, n, 1)
		return
	}
	st := b.prepared(b.rowsKey(opKey{kind: stats, a: q, b: a, i: layer}), func() (*kernel, []binding, error) {
		d := defs()
		bufs := b.withRows(d, []binding{whole(b.batchBuf), whole(q.buf), kc, whole(q.stats)})
		k, err := b.d.kernel(stats, d)
		return k, bufs, err
	})
	b.dispatch(st, a.KVHeads, n, b.splits)
	pvOp := b.prepared(b.rowsKey(opKey{kind: pv, a: q, b: a, i: layer}), func() (*kernel, []binding, error) {
		d := defs()
		bufs := b.withRows(d, []binding{whole(b.batchBuf), whole(q.buf), kc, vc, whole(q.stats), whole(q.part)})
		k, err := b.d.kernel(pv, d)
		return k, bufs, err
	})
	b.dispatch(pvOp, a.KVHeads, n, b.splits)
	b.attnSum(dst, q, a, rows)
}

// attnParams is the split passes' workgroup size for a (attn_blk.wgsli),
// or ok false where the kernels cannot take it: a power of two (their
// trees halve it) of at least maxSplits (attn_pv combines one split per
// thread) and QPG·D/4 (a thread per output vec4 of the group's heads, as
// many threads as the V pass's D/4-thread groups can use: with 128 the
// 27B's heads of 256 decoded slower than with the 512 of before).
func (b *Backend) attnParams(a infer.Attn) (wg int, ok bool) {
	qpg := a.Heads / a.KVHeads
	wg = 128
	for wg < max(maxSplits, qpg*a.HeadDim/4) {
		wg *= 2
	}
	if a.HeadDim%8 != 0 || wg > int(b.d.Limits.MaxComputeInvocationsPerWorkgroup) {
		return 0, false
	}
	return wg, true
}

// attnRDN is the length of attn_blk's workgroup array rd: a value per
// (head of the workgroup, thread), and 4 per thread for the V pass's group
// sums.
func attnRDN(heads, wg int) int { return max(heads, 4) * wg }

// attnTileParams is the prompt-pass kernels' workgroup size and score
// tile for a (attn_tile.wgsli), or ok false where they cannot take it.
// Each query head of the group scores TILE positions at a time with a tree
// reduction over its TILE threads, so TILE is a power of two; when the
// group size (3 in bonsai-tiny) does not divide WG, the spare threads idle
// through the scoring.
func (b *Backend) attnTileParams(a infer.Attn) (wg, tile int, ok bool) {
	qpg := a.Heads / a.KVHeads
	wg = 128
	for wg < qpg*a.HeadDim/4 {
		wg *= 2
	}
	if a.HeadDim%4 != 0 || wg > int(b.d.Limits.MaxComputeInvocationsPerWorkgroup) || qpg > wg {
		return 0, 0, false
	}
	tile = 1
	for 2*tile*qpg <= wg {
		tile *= 2
	}
	return wg, tile, true
}

// attnBuffers gives q the split partials (and with scores, its scaled
// scores over the cache's context) that attention writes.
func (b *Backend) attnBuffers(q *tensor, a infer.Attn, rows int, scores bool) bool {
	slots := max(rows, maxSplits)
	if q.part == nil {
		part, err := b.d.newBuffer(q.name+".part", uint64(slots*a.Heads*a.HeadDim*4), storageUsage)
		if err != nil {
			b.fail(err)
			return false
		}
		stats, err := b.d.newBuffer(q.name+".stats", uint64(slots*a.Heads*8), storageUsage)
		if err != nil {
			part.Release()
			b.fail(err)
			return false
		}
		q.part, q.stats = part, stats
	}
	if need := uint64(a.Heads * b.kv.spec.Context * 4); scores && (q.scores == nil || q.scores.GetSize() < need) {
		if q.scores != nil {
			b.dropOps(q.scores)
			q.scores.Release()
			q.scores = nil
		}
		buf, err := b.d.newBuffer(q.name+".scores", need, storageUsage)
		if err != nil {
			b.fail(err)
			return false
		}
		q.scores = buf
	}
	return true
}

// attnQK encodes a decode layer's waiting q/k norm+Rope and KV store p
// with its attention n (fuse checked the shapes): attn_qk (prologue and
// pass 1, keeping the scores), attn_pv on those scores, attn_sum. q and k
// are left un-rotated (fuse leaves their norm+Rope waiting).
func (b *Backend) attnQK(n *node, p value) {
	s := b.kv.spec
	dst, a := n.dst, n.attn
	q, k, v := p.dst, p.src, p.up
	wg, _ := b.attnParams(a)
	rows := min(q.rows, dst.rows)
	if !b.attnBuffers(q, a, rows, true) {
		return
	}
	qpg := a.Heads / a.KVHeads
	kvd := s.KVHeads * s.HeadDim
	r := p.rope
	nrwg := normRopeThreads(a.HeadDim)
	kc, vc, off := b.kvBind(p.layer)
	defs := func() map[string]shaders.Const {
		return map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "KVHEADS": shaders.U32(a.KVHeads), "QPG": shaders.U32(qpg), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(kvd), "QROWS": shaders.U32(1), "LAYER_OFF": shaders.U32(off),
			"SCALE": shaders.F32(a.Scale), "WIN": shaders.U32(a.Window), "WG": shaders.U32(wg), "RT": shaders.U32(1), "RDN": shaders.U32(attnRDN(qpg, wg)), "SCTX": shaders.U32(s.Context)}
	}
	k1 := b.prepared(opKey{kind: "attnqk", a: q, b: k, c: v, d: p.w, e: p.kw, g: a, i: p.layer, f: p.eps}, func() (*kernel, []binding, error) {
		d := defs()
		d["DIMS"], d["QEPS"], d["KEPS"], d["NRWG"] = shaders.U32(r.Dims), shaders.F32(p.eps), shaders.F32(p.keps), shaders.U32(nrwg)
		d["VH"], d["CTX"], d["SCORES"] = shaders.U32((qpg+1)*nrwg), shaders.U32(s.Context), shaders.Flag(true)
		kOff := off
		if s.K == infer.KVQ8_0 {
			kOff = b.kvQ8Off(p.layer)
		}
		d["K4"] = shaders.Flag(kOff%4 == 0)
		kern, err := b.d.kernel("attn_qk", b.kvDefs(d, p.layer))
		return kern, []binding{whole(b.batchBuf), whole(p.w.chunks[0].buf), whole(p.kw.chunks[0].buf), whole(p.table),
			whole(q.buf), whole(k.buf), whole(v.buf), kc, vc, whole(q.stats), whole(q.scores)}, err
	})
	b.dispatch(k1, a.KVHeads, b.splits, 1)
	pv := b.prepared(opKey{kind: "attnpv+scored", a: q, b: a, i: p.layer}, func() (*kernel, []binding, error) {
		d := defs()
		d["SCORED"] = shaders.Flag(true)
		kern, err := b.d.kernel("attn_pv", b.kvDefs(d, p.layer))
		return kern, []binding{whole(b.batchBuf), at(3, vc), at(4, whole(q.stats)), at(5, whole(q.part)), at(6, whole(q.scores))}, err
	})
	b.dispatch(pv, a.KVHeads, 1, b.splits)
	b.attnSum(dst, q, a, rows)
}

// attnSum encodes attention's pass 3 (the splits' sum) into dst; in
// decode with q1_xq also dst's Q8_0 rounding for the output projection.
func (b *Backend) attnSum(dst, q *tensor, a infer.Attn, rows int) {
	q8 := b.attnSumQ8(a)
	if q8 {
		if err := b.xqBuffers(dst); err != nil {
			b.fail(err)
			return
		}
	}
	// a Q8_0 V is rotated by blocks of 64, one workgroup's (kvRotation)
	vrot := kvRotation(b.kv.spec.V, a.HeadDim, false)
	sum := b.prepared(opKey{kind: "attnsum", a: q, b: dst, c: a, i: boolInt(q8) | vrot<<1}, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "D": shaders.U32(a.HeadDim), "QROWS": shaders.U32(rows), "WG": shaders.U32(64), "Q8": shaders.Flag(q8),
			"VROTATE": shaders.Flag(vrot > 0), "VRS": shaders.F32(rotScale(vrot))}
		bufs := []binding{whole(b.batchBuf), whole(q.part), whole(dst.buf)}
		if q8 {
			bufs = b.tabOut(dst, 5, defs, append(bufs, whole(dst.xq), whole(dst.xqSum)))
		}
		k, err := b.d.kernel("attn_sum", defs)
		return k, bufs, err
	})
	b.dispatch(sum, ceilDiv(a.Heads*a.HeadDim, 64), min(rows, b.n), 1)
}

// attnSumQ8 reports whether attn_sum also writes dst's Q8_0 rounding
// (fuse then records the rounded value: Attention's q8, attnFused).
func (b *Backend) attnSumQ8(a infer.Attn) bool {
	return b.xqOK() && b.n == 1 && a.Heads*a.HeadDim%64 == 0
}
