package gpu

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/cogentcore/webgpu/wgpu"
)

// The fusion pass on op lists, without a device: each case records ops as
// the op calls would and checks the plan (what is dispatched, in order)
// and the values left waiting. The names in the plans:
//
//	mv a,b←x       one matvec dispatch writing a and b from x
//	  (norm h=x)   … computing x = RMSNorm(h) in its x load
//	  (swiglu g,u) … computing x = silu(g)·u in its x load
//	  (rounded)    … reading x's Q8_0 rounding
//	  +=r          … adding its output into r (a folded Add)
//	  glu          … with gate/up's SwiGLU epilogue
//	add d=a+b, norm d=x [q8], swiglu d=g,u [q8], rope x, store k,v:
//	               an op of its own
//	  (headnorm u) … norming u per head first (normGLU)
//	attn d←q [lat|head|qk +store]  an attention (fused with the store)
//	phase          a profiler phase begins
//	= norm d=x …   a waiting value computed into its tensor
//	  (headnorm x, normrope x, qkstore q,k,v@layer: the head values)

// fakes is a set of tensors and weights for fuse tests: tensors of one
// row, and Q1_0 weights placed one after another in one arena unless
// apart.
type fakes struct {
	ts         map[string]*tensor
	boff, soff uint64 // the ends of the sign-word and scale arenas
}

func newFakes() *fakes { return &fakes{ts: map[string]*tensor{}} }

// t is the tensor name, of cols columns (256 unless given the first time).
func (f *fakes) t(name string, cols ...int) *tensor {
	if t, ok := f.ts[name]; ok {
		return t
	}
	c := 256
	if len(cols) > 0 {
		c = cols[0]
	}
	t := &tensor{name: name, rows: 1, cols: c}
	f.ts[name] = t
	return t
}

// w is an m×k Q1_0 weight placed right after the last one.
func (f *fakes) w(name string, m, k int) *weight {
	bits, scales := uint64(m*k/8), uint64(m*k/32*4)
	w := &weight{name: name, typ: gguf.Q1_0, k: k, m: m, interleaved: true,
		bits: span{off: f.boff, size: bits}, scales: span{off: f.soff, size: scales}}
	f.boff += bits
	f.soff += scales
	return w
}

// gap leaves a hole in the arena: the next weight follows no other.
func (f *fakes) gap() { f.boff, f.soff = f.boff+1<<20, f.soff+1<<20 }

func mv(dst *tensor, w *weight, x *tensor) node { return node{op: opMatVec, dst: dst, x: x, w: w} }
func add(dst, a, b *tensor) node                { return node{op: opAdd, dst: dst, x: a, y: b} }
func touch(t *tensor) node                      { return node{op: opTouch, x: t} }
func norm(dst, x *tensor, lazy, q8 bool) node {
	return node{op: opNorm, dst: dst, x: x, w: &weight{name: "norm", typ: gguf.F32, k: x.cols, m: 1}, eps: 1e-6, lazy: lazy, q8: q8}
}
func swiglu(dst, g, u *tensor, lazy, q8 bool) node {
	return node{op: opSwiGLU, dst: dst, x: g, y: u, lazy: lazy, q8: q8}
}

// The head ops: heads of 32 values, one rotation and its (fake) table.
var (
	rope32  = infer.Rope{HeadDim: 32, Dims: 32, Base: 1e6, FreqScale: 1}
	table32 = &wgpu.Buffer{}
	norm32  = &weight{name: "headnorm", typ: gguf.F32, k: 32, m: 1}
)

func headNorm(x *tensor, w *weight) node { return node{op: opHeadNorm, x: x, w: w, eps: 1e-6} }
func rope(x *tensor, r infer.Rope, lazy bool) node {
	return node{op: opRope, x: x, rope: r, table: table32, lazy: lazy}
}
func storeKV(k, v *tensor, layer, headDim int, lazy bool) node {
	return node{op: opStoreKV, x: k, y: v, layer: layer, headDim: headDim, lazy: lazy}
}
func attn(dst, q *tensor, layer int, fused attnKind, fusedQ8, q8 bool) node {
	return node{op: opAttn, dst: dst, x: q, layer: layer, attn: infer.Attn{Heads: 4, KVHeads: 2, HeadDim: 32},
		fused: fused, fusedQ8: fusedQ8, q8: q8}
}
func phase(p profile.Phase) node { return node{op: opPhase, phase: p} }

// qkStore is the store value of q, k and v at layer as qkRopeStore makes
// it from norm32's norm+RoPEs.
func qkStore(q, k, v *tensor, layer int) value {
	return value{kind: vQKStore, dst: q, src: k, up: v, w: norm32, eps: 1e-6, kw: norm32, keps: 1e-6,
		rope: rope32, table: table32, layer: layer}
}

func names(ts []*tensor) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.name)
	}
	return strings.Join(s, ",")
}

func (v value) String() string {
	switch v.kind {
	case vSwiGLU:
		return "swiglu " + v.dst.name + "=" + v.src.name + "," + v.up.name
	case vRounded:
		return "rounded " + v.dst.name
	case vNormRope:
		return "normrope " + v.dst.name
	case vHeadNorm:
		return "headnorm " + v.dst.name
	case vQKStore:
		return fmt.Sprintf("qkstore %s,%s,%s@%d", v.dst.name, v.src.name, v.up.name, v.layer)
	}
	return "none"
}

func (s step) String() string {
	switch s.kind {
	case stepMatVec:
		g := s.mv
		out := "mv " + names(g.dst[:g.n]) + "←" + g.x.name
		switch g.in.kind {
		case vSwiGLU:
			out += "(swiglu " + g.in.src.name + "," + g.in.up.name + ")"
		case vRounded:
			out += "(rounded)"
		}
		if g.resid != nil {
			out += " +=" + g.resid.name
		}
		if g.glu {
			out += " glu"
		}
		return out
	case stepOp:
		n := s.op
		var out string
		switch n.op {
		case opAdd:
			out = "add " + n.dst.name + "=" + n.x.name + "+" + n.y.name
		case opNorm:
			out = "norm " + n.dst.name + "=" + n.x.name
		case opSwiGLU:
			out = "swiglu " + n.dst.name + "=" + n.x.name + "," + n.y.name
			if s.v.kind == vHeadNorm {
				out += "(headnorm " + s.v.dst.name + ")"
			}
		case opRope:
			out = "rope " + n.x.name
		case opStoreKV:
			out = "store " + n.x.name + "," + n.y.name
		}
		if n.q8 {
			out += " q8"
		}
		return out
	case stepValue:
		return "= " + s.v.String()
	case stepAttn:
		out := "attn " + s.op.dst.name + "←" + s.op.x.name
		if s.v.kind == vQKStore {
			out += " " + [...]string{attnLat: "lat", attnQK: "qk"}[s.op.fused] + " +store"
		}
		return out
	case stepPhase:
		return "phase"
	}
	return "?"
}

func strs[T fmt.Stringer](xs []T) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, x.String())
	}
	return out
}

// decode is fuse's rules for a decoding pass with the q1_xq epilogue.
var decode = fuseRules{batch1: true, gluEpilogue: true}

type fuseCase struct {
	name  string
	rules fuseRules
	live  []value // waiting before the list
	ops   []node
	end   bool
	plan  []string
	left  []string // values still waiting
}

func runFuseCases(t *testing.T, cases []fuseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, left := fuse(slices.Clone(c.live), c.ops, c.rules, c.end, nil)
			if got := strs(plan); !slices.Equal(got, c.plan) {
				t.Errorf("plan\n got %q\nwant %q", got, c.plan)
			}
			if got := strs(left); !slices.Equal(got, c.left) && (len(got) > 0 || len(c.left) > 0) {
				t.Errorf("waiting\n got %q\nwant %q", got, c.left)
			}
		})
	}
}

// sharedX: matvecs on the same x with adjacent weights are one dispatch,
// at most three; anything else ends the group.
func TestFuseSharedX(t *testing.T) {
	f := newFakes()
	h, x2 := f.t("h"), f.t("x2")
	q, k, v, o := f.t("q", 128), f.t("k", 64), f.t("v", 64), f.t("o", 64)
	wq, wk, wv, wo := f.w("wq", 128, 256), f.w("wk", 64, 256), f.w("wv", 64, 256), f.w("wo", 64, 256)
	f.gap()
	wApart := f.w("wapart", 64, 256)
	wK512 := f.w("wk512", 64, 512)
	wRow := f.w("wrow", 64, 512)
	wRow.interleaved = false
	x512 := f.t("x512", 512)
	runFuseCases(t, []fuseCase{
		{name: "q,k,v", rules: decode, ops: []node{mv(q, wq, h), mv(k, wk, h), mv(v, wv, h)},
			plan: []string{"mv q,k,v←h"}},
		{name: "at most three", rules: decode, ops: []node{mv(q, wq, h), mv(k, wk, h), mv(v, wv, h), mv(o, wo, h)},
			plan: []string{"mv q,k,v←h", "mv o←h"}},
		{name: "weights apart", rules: decode, ops: []node{mv(v, wv, h), mv(o, wApart, h)},
			plan: []string{"mv v←h", "mv o←h"}},
		{name: "another x", rules: decode, ops: []node{mv(q, wq, h), mv(k, wk, x2)},
			plan: []string{"mv q←h", "mv k←x2"}},
		// adjacent weights, the same x (the shapes do not matter to fuse)
		{name: "another K", rules: decode, ops: []node{mv(o, wApart, h), mv(k, wK512, h)},
			plan: []string{"mv o←h", "mv k←h"}},
		{name: "another layout", rules: decode, ops: []node{mv(o, wK512, x512), mv(k, wRow, x512)},
			plan: []string{"mv o←x512", "mv k←x512"}},
		// the second writes what the first writes: one dispatch would race
		{name: "the same dst", rules: decode, ops: []node{mv(k, wk, h), mv(k, wv, h)},
			plan: []string{"mv k←h", "mv k←h"}},
		// a matvec that reads the group's output must follow its dispatch
		{name: "reads an output", rules: decode, ops: []node{mv(q, wq, h), mv(k, wk, q)},
			plan: []string{"mv q←h", "mv k←q"}},
	})
}

// foldAdd: x += W·v right after a single matvec is added in its dispatch.
func TestFuseFoldAdd(t *testing.T) {
	f := newFakes()
	att, h, x, y := f.t("att"), f.t("h"), f.t("x"), f.t("y")
	wo, wa, wb := f.w("wo", 256, 256), f.w("wa", 256, 256), f.w("wb", 256, 256)
	runFuseCases(t, []fuseCase{
		{name: "x=x+h", rules: decode, ops: []node{mv(h, wo, att), add(x, x, h)},
			plan: []string{"mv h←att +=x"}},
		{name: "x=h+x", rules: decode, ops: []node{mv(h, wo, att), add(x, h, x)},
			plan: []string{"mv h←att +=x"}},
		{name: "into another tensor", rules: decode, ops: []node{mv(h, wo, att), add(y, x, h)},
			plan: []string{"mv h←att", "add y=x+h"}},
		// the add would write x while other workgroups load it
		{name: "into the matvec's x", rules: decode, ops: []node{mv(h, wo, att), add(att, att, h)},
			plan: []string{"mv h←att", "add att=att+h"}},
		{name: "after two matvecs", rules: decode, ops: []node{mv(h, wa, att), mv(y, wb, att), add(x, x, h)},
			plan: []string{"mv h,y←att", "add x=x+h"}},
		{name: "one add per matvec", rules: decode, ops: []node{mv(h, wo, att), add(x, x, h), add(y, y, h)},
			plan: []string{"mv h←att +=x", "add y=y+h"}},
		// a group with its add takes no more matvecs
		{name: "then no join", rules: decode, ops: []node{mv(h, wa, att), add(x, x, h), mv(y, wb, att)},
			plan: []string{"mv h←att +=x", "mv y←att"}},
		{name: "without a matvec", rules: decode, ops: []node{add(x, x, h)},
			plan: []string{"add x=x+h"}},
	})
}

// fusedInput and deadValue: a lazy SwiGLU is computed in the x load of
// the matvecs that read it, on its own where anything else touches it or
// its operands, and never where its tensor is overwritten first.
func TestFuseLazyValues(t *testing.T) {
	f := newFakes()
	x, h, att := f.t("x"), f.t("h"), f.t("att")
	q, k, v := f.t("q", 128), f.t("k", 64), f.t("v", 64)
	wq, wk, wv := f.w("wq", 128, 256), f.w("wk", 64, 256), f.w("wv", 64, 256)
	wo := f.w("wo", 256, 256)
	g, u := f.t("g"), f.t("u")
	wd := f.w("wd", 256, 256)
	nq := value{kind: vNormRope, dst: q, w: &weight{}}
	layer := []node{swiglu(h, x, u, true, false), mv(q, wq, h), mv(k, wk, h), mv(v, wv, h)}
	runFuseCases(t, []fuseCase{
		{name: "swiglu in the q/k/v load", rules: decode, ops: layer,
			plan: []string{"mv q,k,v←h(swiglu x,u)"}, left: []string{"swiglu h=x,u"}},
		{name: "dead once overwritten", rules: decode, ops: append(slices.Clone(layer), mv(h, wo, att)),
			plan: []string{"mv q,k,v←h(swiglu x,u)", "mv h←att"}},
		{name: "computed where touched", rules: decode, ops: append(slices.Clone(layer), touch(h)),
			plan: []string{"mv q,k,v←h(swiglu x,u)", "= swiglu h=x,u"}},
		// the SwiGLU reads x: it is computed before x changes
		{name: "computed before its source changes", rules: decode, ops: append(slices.Clone(layer), add(x, x, q)),
			plan: []string{"mv q,k,v←h(swiglu x,u)", "= swiglu h=x,u", "add x=x+q"}},
		{name: "computed at the end", rules: decode, ops: layer, end: true,
			plan: []string{"mv q,k,v←h(swiglu x,u)", "= swiglu h=x,u"}},
		{name: "waiting from an earlier list", rules: decode, live: []value{{kind: vSwiGLU, dst: h, src: x, up: u}},
			ops: []node{mv(q, wq, h)}, plan: []string{"mv q←h(swiglu x,u)"}, left: []string{"swiglu h=x,u"}},
		// prompt passes compute every value on its own
		{name: "not in a prompt pass", rules: fuseRules{}, ops: layer[:2],
			plan: []string{"= swiglu h=x,u", "mv q←h"}},
		{name: "not over a row of odd width", rules: decode, ops: []node{swiglu(f.t("x6", 6), f.t("y6", 6), f.t("z6", 6), true, false), mv(q, f.w("w6", 128, 6), f.t("x6"))},
			plan: []string{"= swiglu x6=y6,z6", "mv q←x6"}},
		{name: "swiglu in the down load", rules: decode, ops: []node{swiglu(g, g, u, true, false), mv(h, wd, g), add(x, x, h)},
			plan: []string{"mv h←g(swiglu g,u) +=x"}, left: []string{"swiglu g=g,u"}},
		// the matvec writes u while other workgroups load silu(g)·u
		{name: "not where the matvec writes its operand", rules: decode, ops: []node{swiglu(g, g, u, true, false), mv(u, wd, g)},
			plan: []string{"= swiglu g=g,u", "mv u←g"}},
		{name: "norm+rope never fused", rules: decode, live: []value{nq}, ops: []node{mv(k, wk, q)},
			plan: []string{"= normrope q", "mv k←q"}},
		{name: "norm+rope dead", rules: decode, live: []value{nq}, ops: []node{mv(q, wq, h)},
			plan: []string{"mv q←h"}},
		// a rounding has nothing to compute: its step encodes nothing
		{name: "rounding touched", rules: decode, live: []value{{kind: vRounded, dst: att}}, ops: []node{touch(att)},
			plan: []string{"= rounded att"}},
	})
}

// Roundings: a norm or SwiGLU of its own with q8 makes its tensor a
// rounded value, which the matvecs on it read (q1_xq), and gluEpilogue:
// SwiGLU of a gate/up pair on a rounded x is the pair's epilogue.
func TestFuseRoundingsAndEpilogue(t *testing.T) {
	f := newFakes()
	x, h, o := f.t("x"), f.t("h"), f.t("o")
	g, u := f.t("g", 128), f.t("u", 128)
	wg, wu := f.w("wg", 128, 256), f.w("wu", 128, 256)
	wd := f.w("wd", 256, 128)
	g64, u64 := f.t("g64", 64), f.t("u64", 64)
	wg64, wu64 := f.w("wg64", 64, 256), f.w("wu64", 64, 256)
	rounded := []value{{kind: vRounded, dst: h}}
	ffn := []node{mv(g, wg, h), mv(u, wu, h), swiglu(g, g, u, true, true), mv(o, wd, g), add(x, x, o)}
	runFuseCases(t, []fuseCase{
		{name: "norm q8", rules: decode, ops: []node{norm(h, x, false, true), mv(g, wg, h), mv(u, wu, h)},
			plan: []string{"norm h=x q8", "mv g,u←h(rounded)"}, left: []string{"rounded h"}},
		// the norm reads x, which the waiting matvec's add writes
		{name: "norm after the group", rules: decode, ops: []node{mv(o, wd, g), add(x, x, o), norm(h, x, false, true)},
			plan: []string{"mv o←g +=x", "norm h=x q8"}, left: []string{"rounded h"}},
		{name: "epilogue", rules: decode, live: rounded, ops: ffn,
			plan: []string{"mv g,u←h(rounded) glu", "mv o←g(rounded) +=x"}, left: []string{"rounded h", "rounded g"}},
		{name: "no epilogue without the rule", rules: fuseRules{batch1: true}, live: rounded, ops: ffn,
			plan: []string{"mv g,u←h(rounded)", "mv o←g(swiglu g,u) +=x"}, left: []string{"rounded h", "swiglu g=g,u"}},
		{name: "no epilogue on an x not rounded", rules: decode, ops: ffn,
			plan: []string{"mv g,u←h", "mv o←g(swiglu g,u) +=x"}, left: []string{"swiglu g=g,u"}},
		{name: "no epilogue for 64 rows", rules: decode, live: rounded,
			ops:  []node{mv(g64, wg64, h), mv(u64, wu64, h), swiglu(g64, g64, u64, true, true)},
			plan: []string{"mv g64,u64←h(rounded)"}, left: []string{"rounded h", "swiglu g64=g64,u64"}},
		// (SwiGLU into up is neither lazy nor q8: they need dst ≠ up)
		{name: "no epilogue into up", rules: decode, live: rounded, ops: []node{mv(g, wg, h), mv(u, wu, h), swiglu(u, g, u, false, false)},
			plan: []string{"mv g,u←h(rounded)", "swiglu u=g,u"}, left: []string{"rounded h"}},
		// operands from different ops (qwen35's DeltaNet output gate):
		// its own dispatch, rounding for the next matvec
		{name: "swiglu q8 of its own", rules: decode, ops: []node{swiglu(g, g, u, true, true), mv(o, wd, g)},
			plan: []string{"swiglu g=g,u q8", "mv o←g(rounded)"}, left: []string{"rounded g"}},
		{name: "not lazy, not q8", rules: fuseRules{}, ops: []node{swiglu(g, g, u, false, false)},
			plan: []string{"swiglu g=g,u"}},
	})
}

// TestFuseDecodeLayerNoAllocs: planning a decode layer's list reuses the
// arrays it is given (the op calls' host time must not grow).
func TestFuseDecodeLayerNoAllocs(t *testing.T) {
	f := newFakes()
	x, h, att, o := f.t("x"), f.t("h"), f.t("att", 128), f.t("o")
	q, k, v := f.t("q", 128), f.t("k", 64), f.t("v", 64)
	g, u := f.t("g", 128), f.t("u", 128)
	wq, wk, wv := f.w("wq", 128, 256), f.w("wk", 64, 256), f.w("wv", 64, 256)
	wo, wg, wu, wd := f.w("wo", 256, 128), f.w("wg", 128, 256), f.w("wu", 128, 256), f.w("wd", 256, 128)
	ops := []node{phase(profile.QKV), norm(h, x, false, true), mv(q, wq, h), mv(k, wk, h), mv(v, wv, h),
		headNorm(q, norm32), headNorm(k, norm32), rope(q, rope32, true), rope(k, rope32, true),
		phase(profile.Attention), storeKV(k, v, 0, 32, true), attn(att, q, 0, attnLat, true, false),
		phase(profile.AttnOutput), mv(o, wo, att), add(x, x, o),
		phase(profile.FFN), norm(h, x, false, true), mv(g, wg, h), mv(u, wu, h),
		swiglu(g, g, u, true, true), mv(o, wd, g), add(x, x, o)}
	live := make([]value, 0, 8)
	plan := make([]step, 0, 16)
	allocs := testing.AllocsPerRun(100, func() {
		live = append(live[:0], value{kind: vRounded, dst: att})
		plan, live = fuse(live, ops, decode, false, plan)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per list", allocs)
	}
	want := []string{"phase", "norm h=x q8", "mv q,k,v←h(rounded)", "phase", "attn att←q lat +store", "phase",
		"mv o←att(rounded) +=x", "phase", "= rounded h", "norm h=x q8", "mv g,u←h(rounded) glu", "mv o←g(rounded) +=x"}
	if got := strs(plan); !slices.Equal(got, want) {
		t.Errorf("plan\n got %q\nwant %q", got, want)
	}
}

// headNorm and normRope: a per-head norm in place waits for the Rope of
// its tensor, and the two wait as one norm+RoPE (computed now with fusion
// off); anything else that reads the tensor computes the norm first.
func TestFuseHeadNormRope(t *testing.T) {
	f := newFakes()
	h, o := f.t("h"), f.t("o")
	q, k := f.t("q", 128), f.t("k", 64)
	wq, wo := f.w("wq", 128, 256), f.w("wo", 256, 128)
	norm64 := &weight{name: "headnorm64", typ: gguf.F32, k: 64, m: 1}
	runFuseCases(t, []fuseCase{
		{name: "norm+rope waits", rules: decode, ops: []node{headNorm(q, norm32), rope(q, rope32, true)},
			left: []string{"normrope q"}},
		{name: "fusion off: computed now", rules: decode, ops: []node{headNorm(q, norm32), rope(q, rope32, false)},
			plan: []string{"= normrope q"}},
		// the norm's heads are not the Rope's: two ops
		{name: "heads of another width", rules: decode, ops: []node{headNorm(q, norm64), rope(q, rope32, true)},
			plan: []string{"= headnorm q", "rope q"}},
		{name: "a Rope of another tensor", rules: decode, ops: []node{headNorm(q, norm32), rope(k, rope32, true)},
			plan: []string{"rope k"}, left: []string{"headnorm q"}},
		{name: "a matvec reads the norm", rules: decode, ops: []node{headNorm(q, norm32), mv(o, wo, q)},
			plan: []string{"= headnorm q", "mv o←q"}},
		{name: "a matvec reads the norm+rope", rules: decode, ops: []node{headNorm(q, norm32), rope(q, rope32, true), mv(o, wo, q)},
			plan: []string{"= normrope q", "mv o←q"}},
		// the norm rewrites what the matvec writes
		{name: "after the matvec that writes q", rules: decode, ops: []node{mv(q, wq, h), headNorm(q, norm32), rope(q, rope32, false)},
			plan: []string{"mv q←h", "= normrope q"}},
		// the second norms what the first wrote
		{name: "a second norm of q", rules: decode, ops: []node{headNorm(q, norm32), headNorm(q, norm32)},
			plan: []string{"= headnorm q"}, left: []string{"headnorm q"}},
		{name: "dead once overwritten", rules: decode, ops: []node{headNorm(q, norm32), rope(q, rope32, true), mv(q, wq, h)},
			plan: []string{"mv q←h"}},
		{name: "computed at the end", rules: decode, ops: []node{headNorm(q, norm32), headNorm(k, norm32), rope(q, rope32, true)}, end: true,
			plan: []string{"= headnorm k", "= normrope q"}},
	})
}

// normGLU: a SwiGLU in its own dispatch (q8, no gate/up pair feeding it)
// norms its up operand's waiting per-head norm first, where the heads fit
// act_q8's workgroup and nothing else waits on up.
func TestFuseNormGLU(t *testing.T) {
	f := newFakes()
	h, z, o, d := f.t("h"), f.t("z"), f.t("o"), f.t("d")
	o96 := f.t("o96", 192)
	wz, wd := f.w("wz", 256, 256), f.w("wd", 256, 256)
	norm96 := &weight{name: "headnorm96", typ: gguf.F32, k: 96, m: 1}
	norm512 := &weight{name: "headnorm512", typ: gguf.F32, k: 512, m: 1}
	o512 := f.t("o512", 1024)
	runFuseCases(t, []fuseCase{
		{name: "the gated DeltaNet output", rules: decode, ops: []node{mv(z, wz, h), headNorm(o, norm32), swiglu(z, z, o, true, true), mv(d, wd, z)},
			plan: []string{"mv z←h", "swiglu z=z,o(headnorm o) q8", "mv d←z(rounded)"}, left: []string{"rounded z"}},
		{name: "not q8: the norm alone first", rules: decode, ops: []node{headNorm(o, norm32), swiglu(z, z, o, true, false)},
			plan: []string{"= headnorm o"}, left: []string{"swiglu z=z,o"}},
		{name: "heads of 96", rules: decode, ops: []node{headNorm(o96, norm96), swiglu(f.t("z96", 192), f.t("z96"), o96, true, true)},
			plan: []string{"= headnorm o96", "swiglu z96=z96,o96 q8"}, left: []string{"rounded z96"}},
		{name: "heads wider than the workgroup", rules: decode, ops: []node{headNorm(o512, norm512), swiglu(f.t("z512", 1024), f.t("z512"), o512, true, true)},
			plan: []string{"= headnorm o512", "swiglu z512=z512,o512 q8"}, left: []string{"rounded z512"}},
		// the gate is normed: the norm must come before the gate's reads
		{name: "the norm on the gate", rules: decode, ops: []node{headNorm(z, norm32), swiglu(z, z, o, true, true)},
			plan: []string{"= headnorm z", "swiglu z=z,o q8"}, left: []string{"rounded z"}},
		{name: "up is dst", rules: decode, ops: []node{headNorm(o, norm32), swiglu(o, z, o, true, true)},
			plan: []string{"= headnorm o", "swiglu o=z,o q8"}, left: []string{"rounded o"}},
		// another value waits reading o (an op computes such a value
		// before it records a norm of o; here it is handed in): both
		// are computed in their order, before the SwiGLU
		{name: "another value reads up", rules: decode,
			live: []value{{kind: vHeadNorm, dst: o, src: o, w: norm32, eps: 1e-6}, {kind: vSwiGLU, dst: d, src: h, up: o}},
			ops:  []node{swiglu(z, z, o, true, true)},
			plan: []string{"= headnorm o", "= swiglu d=h,o", "swiglu z=z,o q8"}, left: []string{"rounded z"}},
		{name: "handed in alone", rules: decode, live: []value{{kind: vHeadNorm, dst: o, src: o, w: norm32, eps: 1e-6}},
			ops:  []node{swiglu(z, z, o, true, true)},
			plan: []string{"swiglu z=z,o(headnorm o) q8"}, left: []string{"rounded z"}},
	})
}

// qkRopeStore: a StoreKV of k over q's and k's waiting norm+RoPEs is one
// qk_rope_store, waiting for its Attention where the node allows it; the
// cache's stores stay in order.
func TestFuseQKRopeStore(t *testing.T) {
	f := newFakes()
	h, x64, u64 := f.t("h"), f.t("x64", 64), f.t("u64", 64)
	q, k, v := f.t("q", 128), f.t("k", 64), f.t("v", 64)
	k2, v2 := f.t("k2", 64), f.t("v2", 64)
	v2rows := &tensor{name: "vr", rows: 2, cols: 64}
	wq := f.w("wq", 128, 256)
	other := rope32
	other.Base = 1e4
	heads := []node{headNorm(q, norm32), headNorm(k, norm32), rope(q, rope32, true), rope(k, rope32, true)}
	with := func(ns ...node) []node { return append(slices.Clone(heads), ns...) }
	store := []value{qkStore(q, k, v, 0)}
	runFuseCases(t, []fuseCase{
		{name: "one dispatch", rules: decode, ops: with(storeKV(k, v, 0, 32, false)),
			plan: []string{"= qkstore q,k,v@0"}},
		{name: "waits for its attention", rules: decode, ops: with(storeKV(k, v, 0, 32, true)),
			left: []string{"qkstore q,k,v@0"}},
		{name: "k rotated otherwise", rules: decode, ops: []node{headNorm(q, norm32), headNorm(k, norm32), rope(q, rope32, true), rope(k, other, true),
			storeKV(k, v, 0, 32, true)},
			plan: []string{"= normrope k", "store k,v"}, left: []string{"normrope q"}},
		{name: "v is q", rules: decode, ops: with(storeKV(k, q, 0, 32, true)),
			plan: []string{"= normrope k", "= normrope q", "store k,q"}},
		{name: "heads not the cache's", rules: decode, ops: with(storeKV(k, v, 0, 64, true)),
			plan: []string{"= normrope k", "store k,v"}, left: []string{"normrope q"}},
		{name: "rows differ", rules: decode, ops: with(storeKV(k, v2rows, 0, 32, true)),
			plan: []string{"= normrope k", "store k,vr"}, left: []string{"normrope q"}},
		{name: "without k's norm+rope", rules: decode, ops: with(storeKV(k2, v2, 0, 32, true)),
			plan: []string{"store k2,v2"}, left: []string{"normrope q", "normrope k"}},
		// the store reads v
		{name: "v's value first", rules: decode, ops: append([]node{swiglu(v, x64, u64, true, false)}, with(storeKV(k, v, 0, 32, true))...),
			plan: []string{"= swiglu v=x64,u64"}, left: []string{"qkstore q,k,v@0"}},
		{name: "stores in order", rules: decode, live: store, ops: []node{storeKV(k2, v2, 1, 32, true)},
			plan: []string{"= qkstore q,k,v@0", "store k2,v2"}},
		// it also writes the cache
		{name: "kept when q is overwritten", rules: decode, live: store, ops: []node{mv(q, wq, h)},
			plan: []string{"= qkstore q,k,v@0", "mv q←h"}},
		{name: "computed before v changes", rules: decode, live: store, ops: []node{add(v, v, x64)},
			plan: []string{"= qkstore q,k,v@0", "add v=v+x64"}},
		{name: "computed at the end", rules: decode, live: store, end: true,
			plan: []string{"= qkstore q,k,v@0"}},
	})
}

// attnPrologue: an Attention of q over its layer's waiting store takes it
// into its fused dispatch where the node names one, leaving q's and k's
// norm+RoPE (and dst's rounding) waiting; otherwise the store is computed
// before the attention reads the cache.
func TestFuseAttnPrologue(t *testing.T) {
	f := newFakes()
	att, x := f.t("att", 128), f.t("x", 128)
	q, k, v, q2 := f.t("q", 128), f.t("k", 64), f.t("v", 64), f.t("q2", 128)
	store := []value{qkStore(q, k, v, 0)}
	runFuseCases(t, []fuseCase{
		{name: "attn_lat", rules: decode, live: store, ops: []node{attn(att, q, 0, attnLat, true, false)},
			plan: []string{"attn att←q lat +store"}, left: []string{"normrope q", "normrope k", "rounded att"}},
		{name: "attn_qk", rules: decode, live: store, ops: []node{attn(att, q, 0, attnQK, true, true)},
			plan: []string{"attn att←q qk +store"}, left: []string{"rounded att", "normrope q", "normrope k"}},
		{name: "attn_lat without rounding", rules: decode, live: store, ops: []node{attn(att, q, 0, attnLat, false, true)},
			plan: []string{"attn att←q lat +store"}, left: []string{"normrope q", "normrope k"}},
		{name: "no fused kernel", rules: decode, live: store, ops: []node{attn(att, q, 0, 0, false, true)},
			plan: []string{"= qkstore q,k,v@0", "attn att←q"}, left: []string{"rounded att"}},
		{name: "another q", rules: decode, live: store, ops: []node{attn(att, q2, 0, attnLat, true, false)},
			plan: []string{"= qkstore q,k,v@0", "attn att←q2"}},
		{name: "another layer", rules: decode, live: store, ops: []node{attn(att, q, 1, attnLat, true, false)},
			plan: []string{"= qkstore q,k,v@0", "attn att←q"}},
		// the kernel writes dst while it reads v
		{name: "dst is v", rules: decode, live: store, ops: []node{attn(v, q, 0, attnLat, false, false)},
			plan: []string{"= qkstore q,k,v@0", "attn v←q"}},
		{name: "heads of another size", rules: decode, live: []value{qkStore(q, k, v, 0)},
			ops:  []node{{op: opAttn, dst: att, x: q, attn: infer.Attn{Heads: 2, KVHeads: 1, HeadDim: 64}, fused: attnLat}},
			plan: []string{"= qkstore q,k,v@0", "attn att←q"}},
		// the kernel reads v as it is
		{name: "a value waits on v", rules: decode, live: []value{qkStore(q, k, v, 0), {kind: vRounded, dst: v}},
			ops:  []node{attn(att, q, 0, attnLat, false, false)},
			plan: []string{"= qkstore q,k,v@0", "attn att←q"}, left: []string{"rounded v"}},
		// it writes all of dst
		{name: "dst's value dies", rules: decode, live: []value{qkStore(q, k, v, 0), {kind: vSwiGLU, dst: att, src: x, up: x}},
			ops:  []node{attn(att, q, 0, attnLat, false, false)},
			plan: []string{"attn att←q lat +store"}, left: []string{"normrope q", "normrope k"}},
		{name: "then rotated where read", rules: decode, live: store, ops: []node{attn(att, q, 0, attnLat, false, false), touch(k)},
			plan: []string{"attn att←q lat +store", "= normrope k"}, left: []string{"normrope q"}},
	})
}

// phase: a profiler phase ends the matvec group; the values wait across
// it (q's and k's norm+RoPE for the StoreKV after it).
func TestFusePhase(t *testing.T) {
	f := newFakes()
	h := f.t("h")
	q, k, v := f.t("q", 128), f.t("k", 64), f.t("v", 64)
	wq, wk := f.w("wq", 128, 256), f.w("wk", 64, 256)
	runFuseCases(t, []fuseCase{
		{name: "ends the group", rules: decode, ops: []node{mv(q, wq, h), phase(profile.Attention), mv(k, wk, h)},
			plan: []string{"mv q←h", "phase", "mv k←h"}},
		{name: "values wait across it", rules: decode,
			ops: []node{headNorm(q, norm32), headNorm(k, norm32), rope(q, rope32, true), rope(k, rope32, true), phase(profile.Attention),
				storeKV(k, v, 0, 32, false)},
			plan: []string{"phase", "= qkstore q,k,v@0"}},
	})
}
