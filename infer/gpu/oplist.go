package gpu

// The decode ops that fuse with one another (the Q1_0 matvec, the residual
// Add, the token RMSNorm and SwiGLU) are not encoded by the op calls:
// each call checks its operands and records a node in the backend's op
// list, and the list goes through fuse (fuse.go), a pure function, which
// plans the dispatches that encodePlan (encode.go) then encodes. The list
// is run through the pass wherever something must be encoded now: an op
// outside the list (attention, the hybrid ops, a prompt pass's matmul),
// a Read or Argmax, a profiler phase, Commit.
//
// A value recorded by a lazy op (a norm or SwiGLU that its reader may
// compute in its x load, a rounding a producer wrote, a q/k norm+RoPE the
// fused attention left for other readers) outlives the list it was
// recorded in: fuse hands the values still undecided back, and they open
// the next list.

// opKind is what a node of the op list does.
type opKind uint8

const (
	// opMatVec: dst = w·x, a decode Q1_0 matvec (one row of x).
	opMatVec opKind = iota + 1
	// opAdd: dst = x + y.
	opAdd
	// opNorm: dst = RMSNorm(x)·w over the whole row (a token norm).
	opNorm
	// opSwiGLU: dst = silu(x)·y.
	opSwiGLU
	// opTouch: an op encoded outside the list reads or writes x.
	opTouch
	// opKill: an op encoded outside the list overwrites x entirely.
	opKill
)

// node is one recorded op. The flags are the recording op's decisions
// that depend on the device or the options (fuse never asks the device):
type node struct {
	op   opKind
	dst  *tensor
	x, y *tensor // operands: see opKind
	w    *weight
	eps  float32
	// opNorm, opSwiGLU: lazy, the result may be left undefined until a
	// reader needs it, and computed in a matvec's x load; q8, the op also
	// writes its Q8_0 rounding (and lookup table) for q1_xq, which makes
	// dst a rounded value (opSwiGLU only where no gate/up pair feeds it
	// directly, or with MatVec xqs).
	lazy, q8 bool
}

// valueKind is how a tensor's value is defined while it waits.
type valueKind uint8

const (
	// vNorm: dst = RMSNorm(src)·w, not yet computed.
	vNorm valueKind = iota + 1
	// vSwiGLU: dst = silu(src)·up, not yet computed.
	vSwiGLU
	// vRounded: dst is computed, and dst.xq (and dst.xtab) hold its Q8_0
	// rounding: a q1_xq matvec on dst reads those.
	vRounded
	// vNormRope: dst is to be normed and rotated in place per head
	// (nr); the fused attention read it so, and left dst as it was.
	vNormRope
)

// value is a tensor's content by definition: what a lazy op would write,
// or a fact about what was written. It dies when its tensor is
// overwritten, and is computed (materialized) when anything but a matvec
// that can fuse it touches the tensor or its operands.
type value struct {
	kind    valueKind
	dst     *tensor
	src, up *tensor
	w       *weight
	eps     float32
	nr      *pendingNormRope
}

// reads reports whether computing v reads t.
func (v value) reads(t *tensor) bool { return v.src == t || v.up == t }

// matvecGroup is up to three decode matvecs on the same x as one
// dispatch: dst[i] = w[i]·x, with resid += dst[0] where resid is set (the
// folded residual Add), x computed in the x load from in (a vNorm or
// vSwiGLU) or read as its rounding (a vRounded in), and with glu gate/up's
// SwiGLU epilogue: dst[0] = silu(dst[0])·dst[1] and its rounding.
type matvecGroup struct {
	n     int
	dst   [3]*tensor
	w     [3]*weight
	x     *tensor
	resid *tensor
	in    value
	glu   bool
}

// stepKind is what a planned step encodes.
type stepKind uint8

const (
	stepMatVec stepKind = iota + 1 // a matvec group (mv)
	stepOp                         // a recorded opAdd, opNorm or opSwiGLU as its own dispatch (op)
	stepValue                      // a waiting value computed into its tensor (v; nothing for vRounded)
)

// step is one entry of the plan fuse gives encodePlan.
type step struct {
	kind stepKind
	mv   matvecGroup
	op   node
	v    value
}
