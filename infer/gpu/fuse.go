package gpu

import "github.com/bonsai-chat/bonsai/infer"

// fuseRules are the pass-wide facts fuse needs.
type fuseRules struct {
	// batch1: the pass decodes one token (Begin's batch of one); only then
	// is a lazy value computed in its reader's x load.
	batch1 bool
	// gluEpilogue: q1_xq takes SwiGLU as the epilogue of the gate/up
	// matvec on a rounded x (a fused decoding pass on a device that
	// grants its workgroup).
	gluEpilogue bool
}

// fuse plans the encoding of ops, the op list since the last plan, after
// the values live still waiting from earlier lists: it returns the steps
// to encode, in order (appended to plan[:0]), and the values still
// waiting after them (live's array, reused). With end, the pass ends
// after ops and every value waiting is computed. fuse needs no device:
// every choice that depends on one was made when the op was recorded.
//
// The fusions, each a method below with the hazard it checks:
//   - sharedX: matvecs on the same x whose weights are adjacent become one
//     dispatch (up to three);
//   - foldAdd: x += W·v right after that matvec is added in its dispatch;
//   - gluEpilogue: SwiGLU of a gate/up pair on a rounded x becomes the
//     pair's epilogue;
//   - fusedInput: a lazy SwiGLU is computed in the x load of the
//     matvecs that read it, and never on its own if its tensor is
//     overwritten first (deadValue);
//   - normGLU: a SwiGLU in its own dispatch norms its up operand's
//     waiting per-head norm first (the gated DeltaNet output);
//   - normRope: a Rope over a waiting per-head norm of its tensor waits
//     as one norm+RoPE;
//   - qkRopeStore: a StoreKV of k over q's and k's waiting norm+RoPEs is
//     one qk_rope_store, which may wait for its Attention;
//   - attnPrologue: an Attention of q over its layer's waiting
//     qk_rope_store takes it into its own dispatch (attn_lat or
//     attn_qk), leaving q's and k's norm+RoPE waiting for other readers;
//   - phase: a profiler phase ends the matvec group (a dispatch is timed
//     in one phase); the values wait across it.
//
// Every value defines its tensors alone (each op computes or drops what
// defines the tensors it writes before it adds a value), and the KV cache
// is written only by a StoreKV or a store value, read only by an
// Attention: a StoreKV or an Attention that does not take the waiting
// store computes it first.
func fuse(live []value, ops []node, r fuseRules, end bool, plan []step) ([]step, []value) {
	f := fuser{r: r, live: live, plan: plan[:0]}
	for i := range ops {
		f.add(&ops[i])
	}
	f.flushGroup()
	if end {
		for len(f.live) > 0 {
			v := f.live[0]
			f.live = append(f.live[:0], f.live[1:]...)
			f.compute(v)
		}
	}
	return f.plan, f.live
}

// fuser is fuse's state as it walks the list.
type fuser struct {
	r     fuseRules
	live  []value
	plan  []step
	group matvecGroup // the matvecs waiting for more to join them
}

func (f *fuser) add(n *node) {
	switch n.op {
	case opMatVec:
		in := f.fusedInput(n.dst, n.x)
		f.overwrite(n.dst)
		if !f.sharedX(n.dst, n.w, n.x, in) {
			f.flushGroup()
		}
		g := &f.group
		g.dst[g.n], g.w[g.n] = n.dst, n.w
		g.n++
		g.x, g.in = n.x, in
	case opAdd:
		f.materialize(n.dst)
		f.materialize(n.x)
		f.materialize(n.y)
		if f.foldAdd(n.dst, n.x, n.y) {
			return
		}
		f.flushGroup()
		f.plan = append(f.plan, step{kind: stepOp, op: *n})
	case opNorm:
		// the norm reads what the waiting matvecs (and their folded add)
		// write: they go first
		f.flushGroup()
		f.materialize(n.x)
		f.materialize(n.dst)
		f.plan = append(f.plan, step{kind: stepOp, op: *n})
		if n.q8 {
			f.live = append(f.live, value{kind: vRounded, dst: n.dst})
		}
	case opSwiGLU:
		if f.gluEpilogue(n) {
			f.group.glu = true
			f.live = append(f.live, value{kind: vRounded, dst: n.dst})
			return
		}
		pair := f.feedsPair(n.x, n.y)
		own := n.q8 && !pair
		f.flushGroup()
		var upNorm value
		if own {
			upNorm = f.normGLU(n)
		}
		f.materialize(n.dst)
		f.materialize(n.x)
		f.materialize(n.y)
		switch {
		case own:
			// its own dispatch, which also rounds for the next q1_xq: the
			// down projection reads the rounding
			f.overwrite(n.dst)
			f.plan = append(f.plan, step{kind: stepOp, op: *n, v: upNorm})
			f.live = append(f.live, value{kind: vRounded, dst: n.dst})
		case n.lazy:
			f.live = append(f.live, value{kind: vSwiGLU, dst: n.dst, src: n.x, up: n.y})
		default:
			n := *n
			n.q8 = false
			f.plan = append(f.plan, step{kind: stepOp, op: n})
		}
	case opTouch:
		f.materialize(n.x)
	case opHeadNorm:
		// it rewrites x: what defines x or reads it goes first
		f.materialize(n.x)
		f.live = append(f.live, value{kind: vHeadNorm, dst: n.x, src: n.x, w: n.w, eps: n.eps})
	case opRope:
		if nr, ok := f.normRope(n); ok {
			f.hold(nr, n.lazy)
			return
		}
		f.materialize(n.x)
		f.op(n)
	case opStoreKV:
		// the cache's stores stay in order
		f.computeStores()
		if s, ok := f.qkRopeStore(n); ok {
			f.hold(s, n.lazy)
			return
		}
		f.materialize(n.x)
		f.materialize(n.y)
		f.op(n)
	case opAttn:
		if s, ok := f.attnPrologue(n); ok {
			f.remove(s)
			// the dispatch writes all of dst
			f.overwrite(n.dst)
			f.flushGroup()
			f.plan = append(f.plan, step{kind: stepAttn, op: *n, v: s})
			// q and k are left as they were, their norm+RoPE waiting
			// for another reader; attn_qk's last pass (attn_sum) and
			// the one-dispatch kernels' epilogue round dst
			if n.fusedQ8 && n.fused == attnQK {
				f.live = append(f.live, value{kind: vRounded, dst: n.dst})
			}
			f.live = append(f.live,
				value{kind: vNormRope, dst: s.dst, w: s.w, eps: s.eps, rope: s.rope, table: s.table},
				value{kind: vNormRope, dst: s.src, w: s.kw, eps: s.keps, rope: s.rope, table: s.table})
			if n.fusedQ8 && n.fused != attnQK {
				f.live = append(f.live, value{kind: vRounded, dst: n.dst})
			}
			return
		}
		// it reads the cache
		f.computeStores()
		f.materialize(n.x)
		f.materialize(n.dst)
		f.flushGroup()
		f.plan = append(f.plan, step{kind: stepAttn, op: *n})
		if n.q8 {
			f.live = append(f.live, value{kind: vRounded, dst: n.dst})
		}
	case opPhase:
		f.flushGroup()
		f.plan = append(f.plan, step{kind: stepPhase, op: *n})
	}
}

// op plans n as a dispatch of its own, after the waiting matvecs.
func (f *fuser) op(n *node) {
	f.flushGroup()
	f.plan = append(f.plan, step{kind: stepOp, op: *n})
}

// normRope is the norm+RoPE that Rope n makes of a per-head norm waiting
// on its tensor, over heads of the Rope's width: the norm is taken out of
// the waiting values. Nothing else can wait on the tensor (opHeadNorm
// computed it first), so the norm+RoPE reads what the norm would have.
// The fused kernels (norm_rope, qk_rope_store, the attention prologues)
// rotate NeoX pairs only: a normal-mode Rope runs on its own.
func (f *fuser) normRope(n *node) (value, bool) {
	if n.rope.Mode != infer.RopeNeoX {
		return value{}, false
	}
	for i, v := range f.live {
		if v.kind != vHeadNorm || v.dst != n.x || v.w.k*v.w.m != n.rope.HeadDim {
			continue
		}
		f.live = append(f.live[:i], f.live[i+1:]...)
		return value{kind: vNormRope, dst: n.x, w: v.w, eps: v.eps, rope: n.rope, table: n.table}, true
	}
	return value{}, false
}

// qkRopeStore is the store StoreKV n makes of k's waiting norm+RoPE and
// the latest other one (q's): both rotated alike (the same rope and
// table) over heads of the cache's size (k, v and the layer fit the
// cache: n.headDim), q, k and v distinct tensors of equal rows. A value
// defining v is computed first (the store reads v). The two norm+RoPEs
// are taken out of the waiting values.
func (f *fuser) qkRopeStore(n *node) (value, bool) {
	k, v := n.x, n.y
	ik, iq := -1, -1
	for i, w := range f.live {
		if w.kind == vNormRope && w.dst == k {
			ik = i
		}
	}
	for i := len(f.live) - 1; i >= 0 && ik >= 0; i-- {
		if w := f.live[i]; w.kind == vNormRope && w.dst != k {
			iq = i
			break
		}
	}
	if ik < 0 || iq < 0 {
		return value{}, false
	}
	nq, nk := f.live[iq], f.live[ik]
	q := nq.dst
	if q == v || k == v || nq.rope != nk.rope || nq.table != nk.table || nk.rope.HeadDim != n.headDim ||
		q.rows != k.rows || k.rows != v.rows {
		return value{}, false
	}
	if _, ok := f.valueOf(v); ok {
		f.materialize(v)
	}
	s := value{kind: vQKStore, dst: q, src: k, up: v, w: nq.w, eps: nq.eps, kw: nk.w, keps: nk.eps,
		rope: nq.rope, table: nq.table, layer: n.layer}
	f.remove(nq)
	f.remove(nk)
	return s, true
}

// attnPrologue is the waiting store Attention n takes into its fused
// dispatch: the store of n's layer whose q is n's, where the device and
// the pass run a fused kernel for n (n.fused), the heads are the
// attention's, dst is none of q, k and v (the kernel writes dst while it
// reads them) and no other value waits on q, k or v (the kernel reads
// them as the store left them).
func (f *fuser) attnPrologue(n *node) (value, bool) {
	if n.fused == 0 {
		return value{}, false
	}
	is := -1
	for i, v := range f.live {
		if v.kind == vQKStore {
			is = i
		}
	}
	if is < 0 {
		return value{}, false
	}
	s := f.live[is]
	q, k, v := s.dst, s.src, s.up
	if q != n.x || s.layer != n.layer || n.dst == q || n.dst == k || n.dst == v || s.rope.HeadDim != n.attn.HeadDim {
		return value{}, false
	}
	for i, o := range f.live {
		if i != is && (o.defines(q) || o.defines(k) || o.defines(v)) {
			return value{}, false
		}
	}
	return s, true
}

// computeStores computes the waiting KV store, if any.
func (f *fuser) computeStores() {
	for i := 0; i < len(f.live); {
		if v := f.live[i]; v.kind == vQKStore {
			f.live = append(f.live[:i], f.live[i+1:]...)
			f.compute(v)
			continue
		}
		i++
	}
}

// remove takes v out of the waiting values.
func (f *fuser) remove(v value) {
	for i := range f.live {
		if f.live[i] == v {
			f.live = append(f.live[:i], f.live[i+1:]...)
			return
		}
	}
}

// valueOf is the waiting value that defines t, if any.
func (f *fuser) valueOf(t *tensor) (value, bool) {
	return valueOf(f.live, t)
}

func valueOf(live []value, t *tensor) (value, bool) {
	for _, v := range live {
		if v.defines(t) {
			return v, true
		}
	}
	return value{}, false
}

// fusedInput is the value a matvec of x into dst computes in its x load
// or reads the rounding of, where it can: only a SwiGLU or a rounding
// (not a head op's value), and not a value that reads dst (the
// matvec writes dst while other workgroups still load x), nor one outside
// a one-token pass or over a row that is not a whole number of vec4s.
// Such a value is computed first.
func (f *fuser) fusedInput(dst, x *tensor) value {
	in, ok := f.valueOf(x)
	fusable := in.kind == vSwiGLU || in.kind == vRounded
	if ok && (!fusable || in.reads(dst) || !f.r.batch1 || x.cols%4 != 0) {
		f.materialize(x)
		return value{}
	}
	return in
}

// sharedX reports whether a matvec of x into dst by w joins the waiting
// group: the same x read the same way (in), at most three matrices, none
// of the group's outputs is dst, x or read by in (one dispatch writes them
// all while it reads x), and w's sign words and scales follow the last
// matrix's in the arena with the same K and layout (the kernel addresses
// the group as one matrix). A group with a folded add or a SwiGLU
// epilogue takes no more.
func (f *fuser) sharedX(dst *tensor, w *weight, x *tensor, in value) bool {
	g := &f.group
	if g.n == 0 {
		return true
	}
	last := g.w[g.n-1]
	if g.n >= 3 || g.resid != nil || g.glu || x != g.x || in != g.in || w.k != last.k || w.interleaved != last.interleaved ||
		!w.bits.follows(last.bits) || !w.scales.follows(last.scales) {
		return false
	}
	for _, d := range g.dst[:g.n] {
		if d == dst || d == x || in.reads(d) {
			return false
		}
	}
	return true
}

// foldAdd folds dst = a + b into a waiting single matvec that writes one
// of a and b, where dst is the other (x += W·v): the dispatch still
// writes its own output, then adds it into dst. The other operand must
// not be the matvec's x (the add would race with the x loads) and must be
// a row of the output's width.
func (f *fuser) foldAdd(dst, a, b *tensor) bool {
	g := &f.group
	if g.n != 1 || g.resid != nil || a == b {
		return false
	}
	out := g.dst[0]
	var other *tensor
	switch out {
	case a:
		other = b
	case b:
		other = a
	default:
		return false
	}
	if dst != other || other == g.x || other.cols != out.cols || other.rows < 1 || out.cols != g.w[0].m {
		return false
	}
	g.resid = other
	return true
}

// gluEpilogue reports whether SwiGLU n (gate = silu(gate)·up in place)
// can be the epilogue of the waiting group: exactly gate's and up's
// matvecs, on a rounded x, of equal rows (a multiple of 128, K of 128:
// q1_xq's GLU shape), in the interleaved layout, and no value waits on
// gate or up (the epilogue writes gate and reads both as the matvecs
// leave them).
func (f *fuser) gluEpilogue(n *node) bool {
	g := &f.group
	if !f.r.gluEpilogue || g.n != 2 || g.resid != nil || g.glu || g.in.kind != vRounded {
		return false
	}
	gate, up := n.x, n.y
	pg, pu := g.w[0], g.w[1]
	m := pg.m
	if n.dst != gate || gate == up || g.dst[0] != gate || g.dst[1] != up || pu.m != m || gate.cols != m || up.cols != m ||
		m%128 != 0 || pg.k%128 != 0 || !pg.interleaved {
		return false
	}
	if _, ok := f.valueOf(gate); ok {
		return false
	}
	_, ok := f.valueOf(up)
	return !ok
}

// normGLU takes out of the waiting values the per-head norm of SwiGLU
// n's up operand, for n's own dispatch to compute first (act_q8 HNORM):
// heads of a power of two from 32 to 256 values (act_q8's workgroup holds
// whole heads, and rmsnorm.wgsl sums such a head with one thread per
// value, the tree act_q8 repeats), up neither gate nor dst (the dispatch
// reads gate and writes dst while it norms up in place), and no other
// value waiting on up (it would be computed before the norm it follows).
// The zero value where there is none to take.
func (f *fuser) normGLU(n *node) value {
	up := n.y
	if n.x == up || n.dst == up {
		return value{}
	}
	var hn value
	for _, v := range f.live {
		switch {
		case v.kind == vHeadNorm && v.dst == up && hn.kind == 0:
			hn = v
		case v.defines(up) || v.reads(up):
			return value{}
		}
	}
	if hn.kind == 0 {
		return value{}
	}
	if h := hn.w.k * hn.w.m; h < 32 || h > 256 || h&(h-1) != 0 || up.cols%h != 0 {
		return value{}
	}
	f.remove(hn)
	return hn
}

// feedsPair reports whether the waiting group is exactly the two matvecs
// that write gate and up.
func (f *fuser) feedsPair(gate, up *tensor) bool {
	g := &f.group
	return g.n == 2 && (g.dst[0] == gate && g.dst[1] == up || g.dst[0] == up && g.dst[1] == gate)
}

// flushGroup plans the waiting matvecs.
func (f *fuser) flushGroup() {
	if f.group.n == 0 {
		return
	}
	f.plan = append(f.plan, step{kind: stepMatVec, mv: f.group})
	f.group = matvecGroup{}
}

// materialize computes the waiting values that define t or read it.
func (f *fuser) materialize(t *tensor) {
	for i := 0; i < len(f.live); {
		v := f.live[i]
		if !v.defines(t) && !v.reads(t) {
			i++
			continue
		}
		f.live = append(f.live[:i], f.live[i+1:]...)
		f.compute(v)
	}
}

// overwrite prepares t to be written whole: the values reading t are
// computed first, and one defining t dies (deadValue: nothing read it
// but the matvecs that computed it in their x load), unless it also
// writes elsewhere (a store: kept).
func (f *fuser) overwrite(t *tensor) {
	for i := 0; i < len(f.live); {
		v := f.live[i]
		switch {
		case v.defines(t) && !v.kept(): // also when it reads t (in place): all of it is overwritten
			f.live = append(f.live[:i], f.live[i+1:]...)
		case v.defines(t) || v.reads(t):
			f.live = append(f.live[:i], f.live[i+1:]...)
			f.compute(v)
		default:
			i++
		}
	}
}

// hold keeps a fused value waiting for its reader where its op allows
// that (lazy), else computes it now.
func (f *fuser) hold(v value, lazy bool) {
	if lazy {
		f.live = append(f.live, v)
		return
	}
	f.compute(v)
}

// compute plans v into its tensor, after the waiting matvecs (which may
// read its operands). A rounding has nothing to compute: its step
// encodes nothing, but still ends the waiting group.
func (f *fuser) compute(v value) {
	f.flushGroup()
	f.plan = append(f.plan, step{kind: stepValue, v: v})
}
