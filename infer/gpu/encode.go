package gpu

import (
	"errors"
	"strings"

	"github.com/bonsai-chat/bonsai/shaders"
)

// The backend's side of the op list (oplist.go): recording, running the
// list through fuse where something must be encoded now, and encoding the
// plan with the prepared ops.

// record appends n to the op list.
func (b *Backend) record(n node) { b.opList = append(b.opList, n) }

// flushOps plans the op list and encodes the plan; the values still
// waiting stay for the next list.
func (b *Backend) flushOps() {
	if len(b.opList) == 0 {
		return
	}
	b.planOps(false)
}

// endOps plans and encodes the op list at the end of a pass, computing
// every value still waiting.
func (b *Backend) endOps() { b.planOps(true) }

func (b *Backend) planOps(end bool) {
	b.plan, b.live = fuse(b.live, b.opList, b.fuseRules, end, b.plan)
	b.opList = b.opList[:0]
	for i := range b.plan {
		b.encodeStep(&b.plan[i])
	}
}

// touch readies t for an op encoded outside the list, which may read or
// write it: what the list holds is encoded, and so are the values that
// define t or read it.
func (b *Backend) touch(t *tensor) {
	b.record(node{op: opTouch, x: t})
	b.flushOps()
}

// wroteRounding records that an op outside the list wrote t's Q8_0
// rounding (and table) as a producer in the list would: the matvecs on t
// recorded next read it, until something overwrites t.
func (b *Backend) wroteRounding(t *tensor) { b.live = append(b.live, value{kind: vRounded, dst: t}) }

// passRules are fuse's rules for the pass Begin starts.
func (b *Backend) passRules() fuseRules {
	batch1 := b.n == 1
	gluWG := min(b.xqGLUWG, int(b.d.Limits.MaxComputeInvocationsPerWorkgroup))
	return fuseRules{
		batch1:      batch1,
		gluEpilogue: b.xqOK() && !b.xqSepGLU && batch1 && gluWG >= 64,
		sepGLU:      b.xqSepGLU,
	}
}

// encodeStep encodes one step of the plan.
func (b *Backend) encodeStep(s *step) {
	switch s.kind {
	case stepMatVec:
		b.encodeMatVec(&s.mv)
	case stepOp:
		b.encodeOp(&s.op, s.v)
	case stepValue:
		b.encodeValue(s.v)
	case stepAttn:
		b.encodeAttention(&s.op, s.v)
	case stepPhase:
		if b.err == nil {
			b.prof.phase(b, s.op.phase)
			b.phase = s.op.phase
		}
	}
}

// encodeOp encodes a recorded op as its own dispatch; a q8 SwiGLU first
// computes in its dispatch the head norm v on its up operand (normGLU).
func (b *Backend) encodeOp(n *node, v value) {
	if b.err != nil {
		return
	}
	switch n.op {
	case opAdd:
		b.elementwise("ADD", n.dst, n.x, n.y)
	case opNorm:
		dst, x, w := n.dst, n.x, n.w
		if n.q8 {
			if err := b.xqBuffers(dst); err != nil {
				b.fail(err)
				return
			}
		}
		// act_q8 where its one-value-per-thread shape fits
		if g := w.k * w.m; n.q8 && dst != x && g%256 == 0 && g >= 512 {
			b.actQ8(actQ8Op{dst: dst, x: x, norm: w, eps: n.eps})
		} else {
			b.rmsNorm(dst, x, w, n.eps, n.q8)
		}
	case opSwiGLU:
		if n.q8 {
			if err := b.xqBuffers(n.dst); err != nil {
				b.fail(err)
				return
			}
			b.actQ8(actQ8Op{dst: n.dst, x: n.x, up: n.y, upNorm: v})
			return
		}
		b.elementwise("SWIGLU", n.dst, n.x, n.y)
	case opRope:
		b.rope(n.x, n.rope, n.table)
	case opStoreKV:
		b.storeKV(n.layer, n.x, n.y)
	}
}

// encodeValue computes a waiting value into its tensor.
func (b *Backend) encodeValue(v value) {
	if b.err != nil {
		return
	}
	switch v.kind {
	case vNorm:
		b.rmsNorm(v.dst, v.src, v.w, v.eps, false)
	case vSwiGLU:
		b.elementwise("SWIGLU", v.dst, v.src, v.up)
	case vHeadNorm:
		b.rmsNorm(v.dst, v.dst, v.w, v.eps, false)
	case vNormRope:
		b.normRope(v)
	case vQKStore:
		b.qkRopeStore(v)
	}
}

// encodeMatVec encodes a matvec group as one dispatch.
func (b *Backend) encodeMatVec(g *matvecGroup) {
	if b.err != nil {
		return
	}
	ps := b.mvs[:0]
	for i := range g.n {
		ps = append(ps, pendingMatMul{dst: g.dst[i], w: g.w[i]})
	}
	b.mvs = ps
	x, resid, in, glu := g.x, g.resid, g.in, g.glu
	// x's producer wrote its values and their Q8_0 rounding
	xq := in.kind == vRounded
	if xq {
		in = value{}
	}
	w0 := ps[0].w
	words := w0.k / 32
	wg := 64
	if words >= 256 {
		wg = 128
	}
	var key opKey
	key.kind, key.a, key.b, key.i = "q1mv", x, w0, len(ps)
	ends := []int{0, 0, 0}
	total := 0
	bits, scales := w0.bits, w0.scales
	for i, p := range ps {
		total += p.w.m
		ends[i] = total
		if i > 0 {
			bits.size += p.w.bits.size
			scales.size += p.w.scales.size
		}
	}
	for i := len(ps); i < 3; i++ {
		ends[i] = total
	}
	key.c = ps[0].dst
	if resid != nil {
		key.kind, key.d = "q1mvadd", resid
	}
	// A fused input binds the waiting value's operands instead of x.
	src := x
	var fused []binding
	defs := map[string]shaders.Const{}
	if in.kind != 0 {
		src = in.src
		key.a = src
		if in.kind == vNorm {
			key.v |= keyNormIn
			key.g, key.f = in.w, in.eps
			defs["NORM"] = shaders.Flag(true)
			defs["EPS"] = shaders.F32(in.eps)
			defs["NORMWG"] = shaders.U32(normThreads(src.cols))
			fused = []binding{at(6, whole(in.w.chunks[0].buf))}
		} else {
			key.v |= keyGLUIn
			key.g = in.up
			defs["GLU"] = shaders.Flag(true)
			fused = []binding{at(6, whole(in.up.buf))}
		}
	}
	withDefs := func(m map[string]shaders.Const) map[string]shaders.Const {
		for k, v := range defs {
			m[k] = v
		}
		return q1Layout(m, w0.interleaved, ends[:len(ps)]...)
	}
	if len(ps) > 1 {
		key.d = ps[1].dst
	}
	if len(ps) > 2 {
		key.e = ps[2].dst
	}
	variant := b.matvec
	if xq && b.xqOK() && b.dispatchXQ(key, ps, ends[:len(ps)], bits, scales, x, resid, glu) {
		return
	}
	if strings.HasPrefix(variant, "xq") || b.tab {
		variant = "auto"
	}
	if glu {
		b.fail(errors.New("gpu: SwiGLU was left to a matvec that cannot compute it"))
		return
	}
	// Without a pre-rounded x: on the H200 (run 6) q1_w1 beat select on
	// the 8B's q/k/v (6144 rows) and output projection (4096) but lost to
	// popc on gate/up (24576), on the down projection with SwiGLU in its x
	// load, and on the head: each workgroup quantizes all of x again,
	// which the small matrices amortize over few workgroups and the big
	// ones do not. q1_xq (run 7) does not.
	w1Auto := total <= w1MaxRows && in.kind != vSwiGLU
	if w0.interleaved && (variant == "w1" || variant == "auto" && w1Auto) {
		if cfg, ok := b.w1Config(w0.k, ends[:len(ps)]); ok {
			b.dispatchW1(key, cfg, ps, bits, scales, src, resid, fused, withDefs(map[string]shaders.Const{}))
			return
		}
	}
	switch variant {
	case "auto":
		variant = "auto1"
	case "w1":
		variant = "select"
	}
	if variant == "auto1" || variant == "auto32" || variant == "auto64" {
		big := total*w0.k >= popcMinWeights
		switch {
		case !big:
			variant = "select"
		case variant == "auto1":
			variant = "popc"
		default:
			variant = "popc" + variant[4:]
		}
	}
	if variant == "lut" && (w0.k%2048 != 0 || total%32 != 0 || in.kind != 0 || b.d.Limits.MaxComputeWorkgroupStorageSize < lutWorkgroupBytes) || variant == "popc" && total%16 != 0 ||
		variant == "popc32" && total%32 != 0 || variant == "popc64" && total%64 != 0 {
		variant = "select"
	}
	if variant != "select" {
		key.i += 8
		perWG := 32
		kname, rg := "q1_"+variant, 4
		switch variant {
		case "popc":
			key.i += 8
			perWG = 16
		case "popc32":
			key.i += 16
			kname, rg = "q1_popc", 8
			perWG = 32
		case "popc64":
			key.i += 24
			kname, rg = "q1_popc", 16
			perWG = 64
		}
		o := b.prepared(key, func() (*kernel, []binding, error) {
			k, err := b.d.kernel(kname, withDefs(map[string]shaders.Const{
				"K": shaders.U32(w0.k), "WORDS": shaders.U32(words), "WG": shaders.U32(wg), "RED": shaders.U32(rg * wg), "RG": shaders.U32(rg),
				"M0": shaders.U32(ends[0]), "M1": shaders.U32(ends[1]),
				"OUT2": shaders.Flag(len(ps) > 1), "OUT3": shaders.Flag(len(ps) > 2), "ADD": shaders.Flag(resid != nil)}))
			return k, matVecBindings(bits, scales, src, ps, resid, fused), err
		})
		b.dispatch(o, total/perWG, 1, 1)
		return
	}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("q1_matvec", withDefs(map[string]shaders.Const{
			"K": shaders.U32(w0.k), "WORDS": shaders.U32(words), "WG": shaders.U32(wg), "RED": shaders.U32(2 * wg),
			"M0": shaders.U32(ends[0]), "M1": shaders.U32(ends[1]),
			"OUT2": shaders.Flag(len(ps) > 1), "OUT3": shaders.Flag(len(ps) > 2), "ADD": shaders.Flag(resid != nil)}))
		return k, matVecBindings(bits, scales, src, ps, resid, fused), err
	})
	b.dispatch(o, total/8, 1, 1)
}
