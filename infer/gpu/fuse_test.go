package gpu

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
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
//	add d=a+b, norm d=x [q8], swiglu d=g,u [q8]: an op of its own
//	= norm d=x …   a waiting value computed into its tensor

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
func kill(t *tensor) node                       { return node{op: opKill, x: t} }
func norm(dst, x *tensor, lazy, q8 bool) node {
	return node{op: opNorm, dst: dst, x: x, w: &weight{name: "norm", typ: gguf.F32, k: x.cols, m: 1}, eps: 1e-6, lazy: lazy, q8: q8}
}
func swiglu(dst, g, u *tensor, lazy, q8 bool) node {
	return node{op: opSwiGLU, dst: dst, x: g, y: u, lazy: lazy, q8: q8}
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
	case vNorm:
		return "norm " + v.dst.name + "=" + v.src.name
	case vSwiGLU:
		return "swiglu " + v.dst.name + "=" + v.src.name + "," + v.up.name
	case vRounded:
		return "rounded " + v.dst.name
	case vNormRope:
		return "normrope " + v.dst.name
	}
	return "none"
}

func (s step) String() string {
	switch s.kind {
	case stepMatVec:
		g := s.mv
		out := "mv " + names(g.dst[:g.n]) + "←" + g.x.name
		switch g.in.kind {
		case vNorm:
			out += "(norm " + g.in.src.name + ")"
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
		}
		if n.q8 {
			out += " q8"
		}
		return out
	case stepValue:
		return "= " + s.v.String()
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

// fusedInput and deadValue: a lazy norm or SwiGLU is computed in the x
// load of the matvecs that read it, on its own where anything else touches
// it or its operands, and never where its tensor is overwritten first.
func TestFuseLazyValues(t *testing.T) {
	f := newFakes()
	x, h, att := f.t("x"), f.t("h"), f.t("att")
	q, k, v := f.t("q", 128), f.t("k", 64), f.t("v", 64)
	wq, wk, wv := f.w("wq", 128, 256), f.w("wk", 64, 256), f.w("wv", 64, 256)
	wo := f.w("wo", 256, 256)
	g, u := f.t("g"), f.t("u")
	wd := f.w("wd", 256, 256)
	nq := value{kind: vNormRope, dst: q, nr: &pendingNormRope{x: q}}
	layer := []node{norm(h, x, true, false), mv(q, wq, h), mv(k, wk, h), mv(v, wv, h)}
	runFuseCases(t, []fuseCase{
		{name: "norm in the q/k/v load", rules: decode, ops: layer,
			plan: []string{"mv q,k,v←h(norm x)"}, left: []string{"norm h=x"}},
		{name: "dead once overwritten", rules: decode, ops: append(slices.Clone(layer), mv(h, wo, att)),
			plan: []string{"mv q,k,v←h(norm x)", "mv h←att"}},
		{name: "computed where touched", rules: decode, ops: append(slices.Clone(layer), touch(h)),
			plan: []string{"mv q,k,v←h(norm x)", "= norm h=x"}},
		// the norm reads x: it is computed before x changes
		{name: "computed before its source changes", rules: decode, ops: append(slices.Clone(layer), add(x, x, q)),
			plan: []string{"mv q,k,v←h(norm x)", "= norm h=x", "add x=x+q"}},
		{name: "computed at the end", rules: decode, ops: layer, end: true,
			plan: []string{"mv q,k,v←h(norm x)", "= norm h=x"}},
		{name: "waiting from an earlier list", rules: decode, live: []value{{kind: vNorm, dst: h, src: x, w: &weight{}}},
			ops: []node{mv(q, wq, h)}, plan: []string{"mv q←h(norm x)"}, left: []string{"norm h=x"}},
		// prompt passes compute every value on its own
		{name: "not in a prompt pass", rules: fuseRules{}, ops: layer[:2],
			plan: []string{"= norm h=x", "mv q←h"}},
		{name: "not over a row of odd width", rules: decode, ops: []node{norm(f.t("x6", 6), f.t("y6", 6), true, false), mv(q, f.w("w6", 128, 6), f.t("x6"))},
			plan: []string{"= norm x6=y6", "mv q←x6"}},
		{name: "swiglu in the down load", rules: decode, ops: []node{swiglu(g, g, u, true, false), mv(h, wd, g), add(x, x, h)},
			plan: []string{"mv h←g(swiglu g,u) +=x"}, left: []string{"swiglu g=g,u"}},
		// the matvec writes u while other workgroups load silu(g)·u
		{name: "not where the matvec writes its operand", rules: decode, ops: []node{swiglu(g, g, u, true, false), mv(u, wd, g)},
			plan: []string{"= swiglu g=g,u", "mv u←g"}},
		{name: "norm+rope never fused", rules: decode, live: []value{nq}, ops: []node{mv(k, wk, q)},
			plan: []string{"= normrope q", "mv k←q"}},
		{name: "norm+rope dead", rules: decode, live: []value{nq}, ops: []node{mv(q, wq, h)},
			plan: []string{"mv q←h"}},
		{name: "killed outside the list", rules: decode, live: []value{nq, {kind: vRounded, dst: att}}, ops: []node{kill(att)},
			left: []string{"normrope q"}},
		// a rounding has nothing to compute, but marks where the ops
		// waiting outside the list are encoded
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
		{name: "xqs: q8 of its own after the pair", rules: fuseRules{batch1: true, sepGLU: true}, live: rounded, ops: ffn[:3],
			plan: []string{"mv g,u←h(rounded)", "swiglu g=g,u q8"}, left: []string{"rounded h", "rounded g"}},
		{name: "not lazy, not q8", rules: fuseRules{}, ops: []node{swiglu(g, g, u, false, false)},
			plan: []string{"swiglu g=g,u"}},
	})
}

// TestFuseDecodeLayerNoAllocs: planning a decode layer's list reuses the
// arrays it is given (the op calls' host time must not grow).
func TestFuseDecodeLayerNoAllocs(t *testing.T) {
	f := newFakes()
	x, h, att, o := f.t("x"), f.t("h"), f.t("att"), f.t("o")
	g, u := f.t("g", 128), f.t("u", 128)
	wo, wg, wu, wd := f.w("wo", 256, 256), f.w("wg", 128, 256), f.w("wu", 128, 256), f.w("wd", 256, 128)
	ops := []node{mv(o, wo, att), add(x, x, o), norm(h, x, false, true), mv(g, wg, h), mv(u, wu, h),
		swiglu(g, g, u, true, true), mv(o, wd, g), add(x, x, o)}
	live := make([]value, 0, 8)
	plan := make([]step, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		live = append(live[:0], value{kind: vRounded, dst: att})
		plan, live = fuse(live, ops, decode, false, plan)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per list", allocs)
	}
	want := []string{"mv o←att(rounded) +=x", "norm h=x q8", "mv g,u←h(rounded) glu", "mv o←g(rounded) +=x"}
	if got := strs(plan); !slices.Equal(got, want) {
		t.Errorf("plan\n got %q\nwant %q", got, want)
	}
}
