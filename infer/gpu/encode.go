package gpu

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
	return fuseRules{
		batch1:      batch1,
		gluEpilogue: b.xqOK() && batch1 && b.xqGLUThreads() >= 64,
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
