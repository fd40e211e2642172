package gpu

import (
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
)

// prologue is what attn_head and attn_lat have in common
// (qk_norm_rope.wgsli): one dispatch of a workgroup per query head that
// norms and rotates its q and k heads, stores the new k and v and writes
// dst, with dst's Q8_0 rounding for the output projection where q8; q and
// k are left un-rotated with a lazy norm+Rope each, for a reader other
// than this attention.
type prologue struct {
	dst    *tensor
	p      *pendingQK
	a      infer.Attn
	kc, vc binding
	off    int // LAYER_OFF, as kvBind gives it
	q8     bool
}

// beginPrologue flushes what the dispatch must follow and readies dst;
// q8 is the kernel's own condition for the Q8_0 epilogue, which also needs
// xq on and room for its two buffers (11 storage bindings in all). It
// reports false where an error has stopped the encoding.
func (b *Backend) beginPrologue(dst *tensor, p *pendingQK, a infer.Attn, kc, vc binding, off int, q8 bool) (prologue, bool) {
	b.flushOps()
	b.flushNorms()
	b.flushNormRopes()
	b.kill(dst)
	pr := prologue{dst: dst, p: p, a: a, kc: kc, vc: vc, off: off,
		q8: b.xqOK() && q8 && b.d.Limits.MaxStorageBuffersPerShaderStage >= uint32(11+boolInt(b.tab))}
	if pr.q8 {
		if err := b.xqBuffers(dst); err != nil {
			b.fail(err)
			return pr, false
		}
	}
	return pr, b.err == nil
}

// dispatchPrologue encodes kernel name, its pipeline cached under kind
// and i (the kernel's own parameters, pr.q8 among them), with the
// prologue's constants and bindings and the constants own gives (called
// only for a new pipeline; names of its own), then defers q's and k's
// norm+Rope and dst's rounding.
func (b *Backend) dispatchPrologue(pr prologue, name, kind string, i int, own func() map[string]shaders.Const) {
	p, a, dst := pr.p, pr.a, pr.dst
	key := opKey{kind: kind, a: p.q, b: p.k, c: p.v, d: p.pq.norm.w, e: p.pk.norm.w, g: a, i: i, f: p.pq.norm.eps}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		s := b.kv.spec
		defs := own()
		for n, c := range map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "QPG": shaders.U32(a.Heads / a.KVHeads), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(s.KVHeads * s.HeadDim), "LAYER_OFF": shaders.U32(pr.off), "SCALE": shaders.F32(a.Scale),
			"DIMS": shaders.U32(p.pq.r.Dims), "QEPS": shaders.F32(p.pq.norm.eps), "KEPS": shaders.F32(p.pk.norm.eps),
			"NRWG": shaders.U32(normRopeThreads(a.HeadDim)), "CTX": shaders.U32(s.Context), "Q8": shaders.Flag(pr.q8)} {
			defs[n] = c
		}
		bufs := []binding{whole(b.batchBuf), whole(p.pq.norm.w.chunks[0].buf), whole(p.pk.norm.w.chunks[0].buf), whole(p.pq.table),
			whole(p.q.buf), whole(p.k.buf), whole(p.v.buf), pr.kc, pr.vc, whole(dst.buf)}
		if pr.q8 {
			bufs = b.tabOut(dst, 12, defs, append(bufs, whole(dst.xq), whole(dst.xqSum)))
		}
		kern, err := b.d.kernel(name, defs)
		return kern, bufs, err
	})
	b.dispatch(o, a.Heads, 1, 1)
	pq, pk := p.pq, p.pk
	b.define(value{kind: vNormRope, dst: p.q, nr: &pq})
	b.define(value{kind: vNormRope, dst: p.k, nr: &pk})
	if pr.q8 {
		b.define(value{kind: vRounded, dst: dst})
	}
}
