package gpu

import (
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/cogentcore/webgpu/wgpu"
)

// The ops that fuse with one another are not encoded by the op calls:
// each call checks its operands and records a node in the backend's op
// list, and the list goes through fuse (fuse.go), a pure function, which
// plans the dispatches that encodeStep (encode.go) then encodes. They are
// the decode matvec and its neighbours (the Q1_0 matvec, the residual
// Add, the token RMSNorm and SwiGLU), the attention head ops (the per-head
// q/k RMSNorm, Rope, StoreKV, Attention) and the profiler's phase
// boundaries. The list is run through the pass wherever something must be
// encoded now: an op outside the list (the hybrid ops, a prompt pass's
// matmul, LastRow, Embed), a Read or Argmax, Commit.
//
// A value recorded by a lazy op (a norm or SwiGLU that its reader may
// compute in its x load, a rounding a producer wrote, a per-head norm
// waiting for its Rope, a norm+RoPE waiting for its StoreKV, a KV store
// waiting for its Attention, a q/k norm+RoPE the fused attention left for
// other readers) outlives the list it was recorded in: fuse hands the
// values still undecided back, and they open the next list.

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
	// opHeadNorm: x = RMSNorm(x)·w per head, in place (w spans one head).
	opHeadNorm
	// opRope: x rotated in place per head by rope (table: its angles).
	opRope
	// opStoreKV: k (x) and v (y) stored into the cache at layer.
	opStoreKV
	// opAttn: dst = attention of q (x) over the cache at layer.
	opAttn
	// opPhase: a profiler phase begins.
	opPhase
)

// attnKind is the fused attention that would take a waiting KV store
// (and q's and k's norm+RoPE) into its own dispatch.
type attnKind uint8

const (
	attnLat attnKind = iota + 1 // attn_lat, one dispatch
	attnQK                      // attn_qk (with pass 1), attn_pv, attn_sum
)

// node is one recorded op. The flags are the recording op's decisions
// that depend on the device or the options (fuse never asks the device):
type node struct {
	op   opKind
	dst  *tensor
	x, y *tensor // operands: see opKind
	w    *weight
	eps  float32
	// opSwiGLU: lazy, the result may be left undefined until a reader
	// needs it, and computed in a matvec's x load. opNorm, opSwiGLU: q8,
	// the op also writes its Q8_0 rounding (and lookup table) for q1_xq,
	// which makes dst a rounded value (opSwiGLU only where no gate/up
	// pair feeds it directly). opRope: lazy, the norm+RoPE may wait
	// for a StoreKV. opStoreKV: lazy, the store may wait for its
	// Attention. opAttn: q8, the unfused attention writes dst's rounding.
	lazy, q8 bool
	// the head ops' operands: the layer (opStoreKV, opAttn), the rotation
	// and its angle table (opRope), the attention's shape (opAttn), the
	// phase (opPhase)
	layer int
	rope  infer.Rope
	table *wgpu.Buffer
	attn  infer.Attn
	phase profile.Phase
	// opStoreKV: the cache's head size where k, v and layer fit the cache
	// (else 0: no fused store).
	headDim int
	// opAttn: the fused attention the device and the pass would run (0:
	// none), and whether it writes dst's rounding.
	fused   attnKind
	fusedQ8 bool
}

// valueKind is how a tensor's value is defined while it waits.
type valueKind uint8

const (
	// vSwiGLU: dst = silu(src)·up, not yet computed.
	vSwiGLU valueKind = iota + 1
	// vRounded: dst is computed, and dst.xq (and dst.xtab) hold its Q8_0
	// rounding: a q1_xq matvec on dst reads those.
	vRounded
	// vNormRope: dst = Rope(RMSNorm(dst)·w) per head in place, not yet
	// computed (a Rope over a waiting vHeadNorm; or left by a fused
	// attention, which read dst so and left it as it was).
	vNormRope
	// vHeadNorm: dst = RMSNorm(dst)·w per head in place, not yet
	// computed (src = dst).
	vHeadNorm
	// vQKStore: q (dst) and k (src) normed and rotated in place as
	// their vNormRopes were, k and v (up) stored into the cache at layer,
	// not yet computed (one qk_rope_store dispatch). It defines q and k
	// and writes the cache, so it never dies: whatever touches q, k, v or
	// the cache computes it.
	vQKStore
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
	// vNormRope, vQKStore: the rotation and its angle table
	rope  infer.Rope
	table *wgpu.Buffer
	// vQKStore: k's norm (w and eps are q's), the cache layer
	kw    *weight
	keps  float32
	layer int
}

// reads reports whether computing v reads t.
func (v value) reads(t *tensor) bool { return v.src == t || v.up == t }

// defines reports whether v is t's content: dst, and a store's k.
func (v value) defines(t *tensor) bool { return v.dst == t || v.kind == vQKStore && v.src == t }

// kept reports whether v must be computed even where what it defines is
// overwritten (a store also writes the cache).
func (v value) kept() bool { return v.kind == vQKStore }

// matvecGroup is up to three decode matvecs on the same x as one
// dispatch: dst[i] = w[i]·x, with resid += dst[0] where resid is set (the
// folded residual Add), x computed in the x load from in (a
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
	stepAttn                       // an attention (op), fused with the KV store v where v is set
	stepPhase                      // a profiler phase begins (op)
)

// step is one entry of the plan fuse gives encodePlan.
type step struct {
	kind stepKind
	mv   matvecGroup
	op   node
	v    value
}
