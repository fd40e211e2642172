package gpu

import (
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
)

// prologue is attn_lat's (qk_norm_rope.wgsli): one dispatch of a workgroup per query head that
// norms and rotates its q and k heads, stores the new k and v and writes
// dst, with dst's Q8_0 rounding for the output projection where q8; q and
// k are left un-rotated (fuse leaves their norm+Rope waiting for a reader
// other than this attention).
type prologue struct {
	dst    *tensor
	p      value // the vQKStore
	a      infer.Attn
	kc, vc binding
	off    int // LAYER_OFF, as kvBind gives it
	q8     bool
}

// beginPrologue readies attention n's dst for the fused dispatch with the
// store p: q8 is the node's (attnFused). It reports false where an error
// has stopped the encoding.
func (b *Backend) beginPrologue(n *node, p value) (prologue, bool) {
	kc, vc, off := b.kvBind(p.layer)
	pr := prologue{dst: n.dst, p: p, a: n.attn, kc: kc, vc: vc, off: off, q8: n.fusedQ8}
	if pr.q8 {
		if err := b.xqBuffers(n.dst); err != nil {
			b.fail(err)
			return pr, false
		}
	}
	return pr, b.err == nil
}

// dispatchPrologue encodes kernel name, its pipeline cached under kind
// and i (the kernel's own parameters, pr.q8 among them), with the
// prologue's constants and bindings and the constants own gives (called
// only for a new pipeline; names of its own).
func (b *Backend) dispatchPrologue(pr prologue, name, kind string, i int, own func() map[string]shaders.Const) {
	p, a, dst := pr.p, pr.a, pr.dst
	q, k, v := p.dst, p.src, p.up
	key := opKey{kind: kind, a: q, b: k, c: v, d: p.w, e: p.kw, g: a, i: i, f: p.eps}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		s := b.kv.spec
		defs := own()
		for n, c := range map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "QPG": shaders.U32(a.Heads / a.KVHeads), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(s.KVHeads * s.HeadDim), "LAYER_OFF": shaders.U32(pr.off), "SCALE": shaders.F32(a.Scale),
			"DIMS": shaders.U32(p.rope.Dims), "QEPS": shaders.F32(p.eps), "KEPS": shaders.F32(p.keps),
			"NRWG": shaders.U32(normRopeThreads(a.HeadDim)), "CTX": shaders.U32(s.Context), "Q8": shaders.Flag(pr.q8),
			"LAT": shaders.Flag(true)} {
			defs[n] = c
		}
		b.kvDefs(defs, p.layer)
		bufs := []binding{whole(b.batchBuf), whole(p.w.chunks[0].buf), whole(p.kw.chunks[0].buf), whole(p.table),
			whole(q.buf), whole(k.buf), whole(v.buf), pr.kc, pr.vc, whole(dst.buf)}
		if pr.q8 {
			bufs = b.tabOut(dst, 12, defs, append(bufs, whole(dst.xq), whole(dst.xqSum)))
		}
		kern, err := b.d.kernel(name, defs)
		return kern, bufs, err
	})
	b.dispatch(o, a.Heads, 1, 1)
}
