package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

type scope struct {
	parent *scope
	vars   map[string]Value
}

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (s *scope) child() *scope { return &scope{parent: s, vars: map[string]Value{}} }

// writer collects output, keeping which bytes are data.
type writer struct {
	b     strings.Builder
	plain []span
}

func (w *writer) write(s Str) {
	n := w.b.Len()
	w.b.WriteString(s.S)
	for _, p := range s.plain {
		q := span{p.lo + n, p.hi + n}
		if k := len(w.plain); k > 0 && w.plain[k-1].hi == q.lo {
			w.plain[k-1].hi = q.hi
			continue
		}
		w.plain = append(w.plain, q)
	}
}

func (w *writer) str() Str { return Str{S: w.b.String(), plain: w.plain} }

type evaluator struct {
	steps, maxSteps int
	out, maxOut     int
	depth, maxDepth int
	now             func() time.Time
}

func newEvaluator(o Options) *evaluator {
	e := &evaluator{maxSteps: o.Limits.Steps, maxOut: o.Limits.Output, maxDepth: o.Limits.Depth, now: o.Now}
	if e.maxSteps <= 0 {
		e.maxSteps = DefaultSteps
	}
	if e.maxOut <= 0 {
		e.maxOut = 16 << 20
	}
	if e.maxDepth <= 0 {
		e.maxDepth = 100
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e
}

func (e *evaluator) step(pos Pos) error {
	e.steps++
	if e.steps > e.maxSteps {
		return &Error{Pos: pos, Msg: fmt.Sprintf("more than %d steps", e.maxSteps), Err: ErrLimit}
	}
	return nil
}

// grow accounts for a value of n bytes (or items) about to be built: none
// may pass the output cap, and building costs a step per 16 bytes, so a loop
// that copies a large string over and over runs out of steps, not time.
func (e *evaluator) grow(pos Pos, n int) error {
	if n < 0 || n > e.maxOut {
		return &Error{Pos: pos, Msg: fmt.Sprintf("a value would pass %d bytes", e.maxOut), Err: ErrLimit}
	}
	e.steps += n >> 4
	return e.step(pos)
}

// items accounts for a list that will hold total items, added of them new:
// a list may hold a sixteenth of the output cap in items (an item is 16
// bytes), and each new item costs a step.
func (e *evaluator) items(pos Pos, total, added int) error {
	if total < 0 || total > e.maxOut/16 {
		return &Error{Pos: pos, Msg: fmt.Sprintf("a list would pass %d items", e.maxOut/16), Err: ErrLimit}
	}
	e.steps += added
	return e.step(pos)
}

// cost charges the work of one operation that walks the top level of vs: a
// step per item of a list or dict, or per 16 bytes of a string.
func (e *evaluator) cost(pos Pos, vs ...Value) error {
	for _, v := range vs {
		e.steps += size(v)
	}
	return e.step(pos)
}

// deepCost charges an operation that walks all of vs (printing, comparing,
// JSON): a step per node all the way down, up to the most one walk visits.
func (e *evaluator) deepCost(pos Pos, vs ...Value) error {
	for _, v := range vs {
		switch v.(type) {
		case *List, *Dict, *Namespace:
			w := newWalk()
			countNodes(v, 0, w)
			e.steps += walkNodes - max(w.left, 0)
		default:
			e.steps += size(v)
		}
	}
	return e.step(pos)
}

func size(v Value) int {
	switch x := v.(type) {
	case Str:
		return len(x.S) >> 4
	case *List:
		return len(x.Items)
	case *Dict:
		return x.Len()
	case *Namespace:
		return x.d.Len()
	}
	return 0
}

func countNodes(v Value, depth int, w *walk) {
	if depth > 64 || !w.visit() {
		return
	}
	switch x := v.(type) {
	case Str:
		w.left -= len(x.S) >> 4
	case *List:
		for _, it := range x.Items {
			countNodes(it, depth+1, w)
		}
	case *Dict:
		for _, k := range x.keys {
			countNodes(x.m[k], depth+1, w)
		}
	case *Namespace:
		countNodes(x.d, depth+1, w)
	}
}

// wrote accounts for n bytes of output.
func (e *evaluator) wrote(pos Pos, n int) error {
	e.out += n
	if e.out > e.maxOut {
		return &Error{Pos: pos, Msg: fmt.Sprintf("output passes %d bytes", e.maxOut), Err: ErrLimit}
	}
	return nil
}

func (e *evaluator) enter(pos Pos) error {
	e.depth++
	if e.depth > e.maxDepth {
		return &Error{Pos: pos, Msg: fmt.Sprintf("nesting deeper than %d", e.maxDepth), Err: ErrLimit}
	}
	return nil
}

func (e *evaluator) leave() { e.depth-- }

func errAt(pos Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Err: ErrRender}
}

// loopControl carries break and continue out of the loop body.
type loopControl struct {
	pos Pos
	brk bool
}

func (c *loopControl) Error() string { return "break/continue" }

func (e *evaluator) exec(body []node, sc *scope, w *writer) error {
	for _, n := range body {
		if err := e.execNode(n, sc, w); err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) execNode(n node, sc *scope, w *writer) error {
	switch n := n.(type) {
	case *textNode:
		if err := e.wrote(Pos{}, len(n.text)); err != nil {
			return err
		}
		w.write(Text(n.text))
	case *outputNode:
		if err := e.step(n.pos); err != nil {
			return err
		}
		v, err := e.eval(n.e, sc)
		if err != nil {
			return err
		}
		if err := e.deepCost(n.pos, v); err != nil {
			return err
		}
		s := toStr(v)
		if err := e.wrote(n.pos, len(s.S)); err != nil {
			return err
		}
		w.write(s)
	case *ifNode:
		for i, c := range n.conds {
			if err := e.step(n.pos); err != nil {
				return err
			}
			v, err := e.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return e.exec(n.bodies[i], sc, w)
			}
		}
		if len(n.bodies) > len(n.conds) {
			return e.exec(n.bodies[len(n.conds)], sc, w)
		}
	case *forNode:
		return e.execFor(n, sc, w)
	case *setNode:
		return e.execSet(n, sc)
	case *macroNode:
		sc.vars[n.name] = &Macro{name: n.name, params: n.params, body: n.body, scope: sc}
	case *callBlockNode:
		if err := e.step(n.pos); err != nil {
			return err
		}
		caller := &Macro{name: "caller", params: n.params, body: n.body, scope: sc, isCaller: true}
		v, err := e.evalCall(n.call, sc, caller)
		if err != nil {
			return err
		}
		w.write(toStr(v))
	case *filterBlockNode:
		var inner writer
		if err := e.exec(n.body, sc.child(), &inner); err != nil {
			return err
		}
		v, err := e.applyFilter(n.filter, inner.str(), sc)
		if err != nil {
			return err
		}
		w.write(toStr(v))
	case *breakNode:
		return &loopControl{pos: n.pos, brk: true}
	case *continueNode:
		return &loopControl{pos: n.pos}
	}
	return nil
}

func (e *evaluator) execSet(n *setNode, sc *scope) error {
	if err := e.step(n.pos); err != nil {
		return err
	}
	var v Value
	if n.body != nil {
		var inner writer
		if err := e.exec(n.body, sc.child(), &inner); err != nil {
			return err
		}
		v = inner.str()
	} else {
		var err error
		if v, err = e.eval(n.value, sc); err != nil {
			return err
		}
	}
	switch {
	case len(n.targets) == 0: // {% do %}
		return nil
	case n.attr != "":
		obj, _ := sc.lookup(n.targets[0])
		switch o := obj.(type) {
		case *Namespace:
			o.d.Set(n.attr, v)
		case *Dict:
			o.Set(n.attr, v)
		default:
			return errAt(n.pos, "cannot set an attribute on %s %q (only on a namespace)", typeName(obj), n.targets[0])
		}
	case len(n.targets) == 1:
		sc.vars[n.targets[0]] = v
	default:
		items, err := e.unpack(n.pos, v, len(n.targets))
		if err != nil {
			return err
		}
		for i, t := range n.targets {
			sc.vars[t] = items[i]
		}
	}
	return nil
}

func (e *evaluator) unpack(pos Pos, v Value, n int) ([]Value, error) {
	l, ok := v.(*List)
	if !ok || len(l.Items) != n {
		return nil, errAt(pos, "cannot unpack %s into %d names", typeName(v), n)
	}
	return l.Items, nil
}

// iterate lists what a for loop walks: a list's items, a dict's keys, a
// string's characters; undefined and none walk nothing.
func (e *evaluator) iterate(pos Pos, v Value) ([]Value, error) {
	switch x := v.(type) {
	case *List:
		return x.Items, nil
	case *Dict:
		out := make([]Value, len(x.keys))
		data := isTainted(x, 0, newWalk())
		for i, k := range x.keys {
			out[i] = x.keyValue(k, data)
		}
		return out, nil
	case Str:
		if n := utf8.RuneCountInString(x.S); n > 0 {
			if err := e.items(pos, n, n); err != nil {
				return nil, err
			}
		}
		var out []Value
		for i, r := range x.S {
			out = append(out, x.sub(i, i+utf8.RuneLen(r)))
		}
		return out, nil
	case nil, Undefined:
		return nil, nil
	}
	return nil, errAt(pos, "cannot loop over %s", typeName(v))
}

func (e *evaluator) execFor(n *forNode, sc *scope, w *writer) error {
	if err := e.enter(n.pos); err != nil {
		return err
	}
	defer e.leave()
	v, err := e.eval(n.iter, sc)
	if err != nil {
		return err
	}
	all, err := e.iterate(n.iter.position(), v)
	if err != nil {
		return err
	}
	bind := func(s *scope, item Value) error {
		if len(n.targets) == 1 {
			s.vars[n.targets[0]] = item
			return nil
		}
		items, err := e.unpack(n.pos, item, len(n.targets))
		if err != nil {
			return err
		}
		for i, t := range n.targets {
			s.vars[t] = items[i]
		}
		return nil
	}
	items := all
	if n.filter != nil { // the filter runs before loop.length is known
		items = nil
		for _, it := range all {
			if err := e.step(n.pos); err != nil {
				return err
			}
			s := sc.child()
			if err := bind(s, it); err != nil {
				return err
			}
			ok, err := e.eval(n.filter, s)
			if err != nil {
				return err
			}
			if truthy(ok) {
				items = append(items, it)
			}
		}
	}
	if len(items) == 0 {
		return e.exec(n.elseBody, sc.child(), w)
	}
	for i, it := range items {
		if err := e.step(n.pos); err != nil {
			return err
		}
		s := sc.child()
		if err := bind(s, it); err != nil {
			return err
		}
		s.vars["loop"] = &loopInfo{index0: i, length: len(items), items: items}
		if err := e.exec(n.body, s, w); err != nil {
			var ctl *loopControl
			if errors.As(err, &ctl) {
				if ctl.brk {
					break
				}
				continue
			}
			return err
		}
	}
	return nil
}

func (e *evaluator) eval(x expr, sc *scope) (Value, error) {
	if err := e.step(x.position()); err != nil {
		return nil, err
	}
	switch x := x.(type) {
	case *literal:
		return x.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(x.name); ok {
			return v, nil
		}
		if g, ok := globals[x.name]; ok {
			return g, nil
		}
		return Undefined{Name: x.name}, nil
	case *listExpr:
		l := &List{Items: make([]Value, 0, len(x.items))}
		for _, it := range x.items {
			v, err := e.eval(it, sc)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, v)
		}
		return l, nil
	case *dictExpr:
		d := NewDict()
		for i := range x.keys {
			k, err := e.eval(x.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := e.eval(x.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.setKey(k, v)
		}
		return d, nil
	case *attrExpr:
		obj, err := e.eval(x.obj, sc)
		if err != nil {
			return nil, err
		}
		return e.getAttr(obj, x.name), nil
	case *indexExpr:
		return e.evalIndex(x, sc)
	case *callExpr:
		return e.evalCall(x, sc, nil)
	case *filterExpr:
		arg, err := e.eval(x.arg, sc)
		if err != nil {
			return nil, err
		}
		return e.applyFilter(x, arg, sc)
	case *testExpr:
		return e.evalTest(x, sc)
	case *unaryExpr:
		v, err := e.eval(x.x, sc)
		if err != nil {
			return nil, err
		}
		switch x.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch n := v.(type) {
			case int64:
				return -n, nil
			case float64:
				return -n, nil
			}
			return nil, errAt(x.pos, "cannot negate %s", typeName(v))
		}
		return v, nil
	case *condExpr:
		c, err := e.eval(x.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return e.eval(x.yes, sc)
		}
		return e.eval(x.no, sc)
	case *binaryExpr:
		return e.evalBinary(x, sc)
	}
	return nil, errAt(x.position(), "unknown expression")
}

func (e *evaluator) getAttr(obj Value, name string) Value {
	switch o := obj.(type) {
	case *Dict:
		if m := method(obj, name); m != nil {
			if _, own := o.m[name]; !own {
				return m
			}
		}
		if v, ok := o.m[name]; ok {
			return v
		}
	case *Namespace:
		if v, ok := o.d.m[name]; ok {
			return v
		}
	case *loopInfo:
		return o.attr(name)
	case Str, *List:
		if m := method(obj, name); m != nil {
			return m
		}
	}
	return Undefined{Name: name}
}

func (l *loopInfo) attr(name string) Value {
	i, n := l.index0, l.length
	switch name {
	case "index":
		return int64(i + 1)
	case "index0":
		return int64(i)
	case "revindex":
		return int64(n - i)
	case "revindex0":
		return int64(n - i - 1)
	case "first":
		return i == 0
	case "last":
		return i == n-1
	case "length":
		return int64(n)
	case "previtem":
		if i > 0 {
			return l.items[i-1]
		}
	case "nextitem":
		if i+1 < n {
			return l.items[i+1]
		}
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "cycle":
		return &builtin{name: "cycle", fn: func(_ *evaluator, pos Pos, args []Value, _ *Dict) (Value, error) {
			if len(args) == 0 {
				return nil, errAt(pos, "loop.cycle needs arguments")
			}
			return args[i%len(args)], nil
		}}
	}
	return Undefined{Name: name}
}

func (e *evaluator) evalIndex(x *indexExpr, sc *scope) (Value, error) {
	obj, err := e.eval(x.obj, sc)
	if err != nil {
		return nil, err
	}
	if x.isSlice {
		var b [3]Value
		for i, p := range []expr{x.lo, x.hi, x.step} {
			b[i] = nil
			if p != nil {
				if b[i], err = e.eval(p, sc); err != nil {
					return nil, err
				}
			}
		}
		return slice(x.pos, obj, b[0], b[1], b[2])
	}
	key, err := e.eval(x.index, sc)
	if err != nil {
		return nil, err
	}
	return index(obj, key), nil
}

func index(obj, key Value) Value {
	switch o := obj.(type) {
	case *Dict:
		if k, ok := key.(Str); ok {
			if v, ok := o.m[k.S]; ok {
				return v
			}
			if m := method(obj, k.S); m != nil {
				return m
			}
		} else if ks := toStr(key).S; o.orig[ks] != nil {
			return o.m[ks]
		}
	case *Namespace:
		if k, ok := key.(Str); ok {
			if v, ok := o.d.m[k.S]; ok {
				return v
			}
		}
	case *List:
		if i, ok := key.(int64); ok {
			if i < 0 {
				i += int64(len(o.Items))
			}
			if i >= 0 && i < int64(len(o.Items)) {
				return o.Items[i]
			}
		}
	case Str:
		if i, ok := key.(int64); ok {
			n := int64(utf8.RuneCountInString(o.S))
			if i < 0 {
				i += n
			}
			if i >= 0 && i < n {
				lo := runeOffset(o.S, int(i))
				_, size := utf8.DecodeRuneInString(o.S[lo:])
				return o.sub(lo, lo+size)
			}
		}
	case *loopInfo:
		if k, ok := key.(Str); ok {
			return o.attr(k.S)
		}
	}
	name := ""
	if k, ok := key.(Str); ok {
		name = k.S
	}
	return Undefined{Name: name}
}

// runeOffset is the byte offset of the i-th rune of s (len(s) past the end).
func runeOffset(s string, i int) int {
	for off := range s {
		if i == 0 {
			return off
		}
		i--
	}
	return len(s)
}

// sliceBounds resolves Python slice bounds over n elements.
func sliceBounds(pos Pos, n int, lo, hi, step Value) (start, stop, st int, err error) {
	st = 1
	if step != nil {
		s, ok := step.(int64)
		if !ok || s == 0 {
			return 0, 0, 0, errAt(pos, "slice step must be a non-zero integer")
		}
		st = int(max(min(s, math.MaxInt32), math.MinInt32))
	}
	get := func(v Value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		if _, u := v.(Undefined); u {
			return def, nil
		}
		i, ok := v.(int64)
		if !ok {
			return 0, errAt(pos, "slice index must be an integer, not %s", typeName(v))
		}
		if i < 0 {
			i += int64(n)
		}
		if st > 0 {
			return int(max(0, min(i, int64(n)))), nil
		}
		return int(max(-1, min(i, int64(n-1)))), nil
	}
	if st > 0 {
		if start, err = get(lo, 0); err == nil {
			stop, err = get(hi, n)
		}
	} else {
		if start, err = get(lo, n-1); err == nil {
			stop, err = get(hi, -1)
		}
	}
	return start, stop, st, err
}

func slice(pos Pos, obj, lo, hi, step Value) (Value, error) {
	switch o := obj.(type) {
	case *List:
		start, stop, st, err := sliceBounds(pos, len(o.Items), lo, hi, step)
		if err != nil {
			return nil, err
		}
		out := &List{}
		for i := start; st > 0 && i < stop || st < 0 && i > stop; i += st {
			out.Items = append(out.Items, o.Items[i])
		}
		return out, nil
	case Str:
		n := utf8.RuneCountInString(o.S)
		start, stop, st, err := sliceBounds(pos, n, lo, hi, step)
		if err != nil {
			return nil, err
		}
		if st == 1 {
			if stop <= start {
				return Str{}, nil
			}
			return o.sub(runeOffset(o.S, start), runeOffset(o.S, stop)), nil
		}
		runes := []rune(o.S)
		var b strings.Builder
		for i := start; st > 0 && i < stop || st < 0 && i > stop; i += st {
			b.WriteRune(runes[i])
		}
		return derived(b.String(), obj), nil
	case Undefined, nil:
		return Undefined{}, nil
	}
	return nil, errAt(pos, "cannot slice %s", typeName(obj))
}

func (e *evaluator) evalArgs(c *callExpr, sc *scope) ([]Value, *Dict, error) {
	args := make([]Value, 0, len(c.args))
	for _, a := range c.args {
		v, err := e.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	kw := NewDict()
	for i, k := range c.kwKeys {
		v, err := e.eval(c.kwVals[i], sc)
		if err != nil {
			return nil, nil, err
		}
		kw.Set(k, v)
	}
	return args, kw, nil
}

func (e *evaluator) evalCall(c *callExpr, sc *scope, caller *Macro) (Value, error) {
	fn, err := e.eval(c.fn, sc)
	if err != nil {
		return nil, err
	}
	args, kw, err := e.evalArgs(c, sc)
	if err != nil {
		return nil, err
	}
	return e.call(c.pos, fn, args, kw, caller)
}

func (e *evaluator) call(pos Pos, fn Value, args []Value, kw *Dict, caller *Macro) (Value, error) {
	switch f := fn.(type) {
	case *builtin:
		if err := e.cost(pos, f.recv); err != nil {
			return nil, err
		}
		return f.fn(e, pos, args, kw)
	case *Macro:
		return e.callMacro(pos, f, args, kw, caller)
	case Undefined:
		return nil, errAt(pos, "%q is not defined or not callable", f.Name)
	}
	return nil, errAt(pos, "%s is not callable", typeName(fn))
}

func (e *evaluator) callMacro(pos Pos, m *Macro, args []Value, kw *Dict, caller *Macro) (Value, error) {
	if err := e.enter(pos); err != nil {
		return nil, err
	}
	defer e.leave()
	s := m.scope.child()
	extra := &List{}
	for i, p := range m.params {
		switch v, ok := kw.Get(p.name); {
		case i < len(args):
			s.vars[p.name] = args[i]
		case ok:
			s.vars[p.name] = v
		case p.def != nil:
			d, err := e.eval(p.def, s)
			if err != nil {
				return nil, err
			}
			s.vars[p.name] = d
		default:
			s.vars[p.name] = Undefined{Name: p.name}
		}
	}
	if len(args) > len(m.params) {
		extra.Items = args[len(m.params):]
	}
	s.vars["varargs"] = extra
	rest := NewDict()
	for _, k := range kw.Keys() {
		isParam := false
		for _, p := range m.params {
			isParam = isParam || p.name == k
		}
		if !isParam {
			rest.Set(k, kw.m[k])
		}
	}
	s.vars["kwargs"] = rest
	if caller != nil {
		s.vars["caller"] = caller
	}
	var w writer
	if err := e.exec(m.body, s, &w); err != nil {
		var ctl *loopControl
		if errors.As(err, &ctl) { // not the caller's loop to break
			return nil, errAt(ctl.pos, "break or continue outside a loop")
		}
		return nil, err
	}
	return w.str(), nil
}

func (e *evaluator) evalBinary(x *binaryExpr, sc *scope) (Value, error) {
	l, err := e.eval(x.l, sc)
	if err != nil {
		return nil, err
	}
	switch x.op { // short-circuit, returning an operand as Python does
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return e.eval(x.r, sc)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return e.eval(x.r, sc)
	}
	r, err := e.eval(x.r, sc)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "==", "!=", "in", "not in", "~":
		err = e.deepCost(x.pos, l, r)
	default:
		err = e.cost(x.pos, l, r)
	}
	if err != nil {
		return nil, err
	}
	return e.binary(x.pos, x.op, l, r)
}

func (e *evaluator) binary(pos Pos, op string, l, r Value) (Value, error) {
	switch op {
	case "==":
		return equal(l, r, 0), nil
	case "!=":
		return !equal(l, r, 0), nil
	case "<", ">", "<=", ">=":
		c, err := compare(l, r)
		if err != nil {
			return nil, errAt(pos, "%v", err)
		}
		switch op {
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		}
		return c >= 0, nil
	case "in", "not in":
		in, err := contains(pos, r, l)
		if err != nil {
			return nil, err
		}
		return in == (op == "in"), nil
	case "~":
		a, b := toStr(l), toStr(r)
		if err := e.grow(pos, len(a.S)+len(b.S)); err != nil {
			return nil, err
		}
		return concatStr(a, b), nil
	case "+":
		switch a := l.(type) {
		case Str:
			if b, ok := r.(Str); ok {
				if err := e.grow(pos, len(a.S)+len(b.S)); err != nil {
					return nil, err
				}
				return concatStr(a, b), nil
			}
		case *List:
			if b, ok := r.(*List); ok {
				if err := e.items(pos, len(a.Items)+len(b.Items), len(a.Items)+len(b.Items)); err != nil {
					return nil, err
				}
				return &List{Items: append(append([]Value{}, a.Items...), b.Items...)}, nil
			}
		}
	case "*":
		if s, ok := l.(Str); ok {
			if n, ok := r.(int64); ok {
				if n <= 0 {
					return Str{}, nil
				}
				if n > int64(e.maxOut) || e.grow(pos, len(s.S)*int(n)) != nil {
					return nil, e.grow(pos, -1)
				}
				var w writer
				for range n {
					w.write(s)
				}
				return w.str(), nil
			}
		}
		if li, ok := l.(*List); ok {
			if n, ok := r.(int64); ok {
				if n > int64(e.maxOut) {
					return nil, e.items(pos, -1, 0)
				}
				if err := e.items(pos, len(li.Items)*int(max(n, 0)), len(li.Items)*int(max(n, 0))); err != nil {
					return nil, err
				}
				out := &List{}
				for range max(n, 0) {
					out.Items = append(out.Items, li.Items...)
				}
				return out, nil
			}
		}
	case "%":
		if s, ok := l.(Str); ok {
			return pyFormat(pos, s, r)
		}
	}
	return arith(pos, op, l, r)
}

func arith(pos Pos, op string, l, r Value) (Value, error) {
	ai, aInt := l.(int64)
	bi, bInt := r.(int64)
	if b, ok := l.(bool); ok {
		ai, aInt = boolInt(b), true
	}
	if b, ok := r.(bool); ok {
		bi, bInt = boolInt(b), true
	}
	if aInt && bInt {
		switch op {
		case "+":
			return ai + bi, nil
		case "-":
			return ai - bi, nil
		case "*":
			return ai * bi, nil
		case "//", "%":
			if bi == 0 {
				return nil, errAt(pos, "division by zero")
			}
			q, m := ai/bi, ai%bi
			if m != 0 && (m < 0) != (bi < 0) { // Python floors
				q--
				m += bi
			}
			if op == "//" {
				return q, nil
			}
			return m, nil
		case "**":
			if bi >= 0 {
				res := int64(1)
				for range min(bi, 64) {
					res *= ai
				}
				return res, nil
			}
		}
	}
	a, ok1 := toFloat(l)
	b, ok2 := toFloat(r)
	if !ok1 || !ok2 {
		return nil, errAt(pos, "unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
	}
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, errAt(pos, "division by zero")
		}
		return a / b, nil
	case "//":
		if b == 0 {
			return nil, errAt(pos, "division by zero")
		}
		return math.Floor(a / b), nil
	case "%":
		if b == 0 {
			return nil, errAt(pos, "division by zero")
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m, nil
	case "**":
		return math.Pow(a, b), nil
	}
	return nil, errAt(pos, "unknown operator %s", op)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func contains(pos Pos, container, item Value) (bool, error) {
	switch c := container.(type) {
	case Str:
		s, ok := item.(Str)
		if !ok {
			return false, errAt(pos, "'in <string>' needs a string on the left, not %s", typeName(item))
		}
		return strings.Contains(c.S, s.S), nil
	case *List:
		for _, it := range c.Items {
			if equal(it, item, 0) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		if s, ok := item.(Str); ok {
			_, ok := c.m[s.S]
			return ok, nil
		}
		return false, nil
	case *Namespace:
		if s, ok := item.(Str); ok {
			_, ok := c.d.m[s.S]
			return ok, nil
		}
		return false, nil
	case Undefined, nil:
		return false, nil
	}
	return false, errAt(pos, "cannot look in %s", typeName(container))
}

// pyFormat is `str % args` for %s, %d, %i, %f and %%.
func pyFormat(pos Pos, f Str, arg Value) (Value, error) {
	var args []Value
	if l, ok := arg.(*List); ok {
		args = l.Items
	} else {
		args = []Value{arg}
	}
	var b strings.Builder
	k := 0
	s := f.S
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
			continue
		}
		if k >= len(args) {
			return nil, errAt(pos, "not enough arguments for format string")
		}
		a := args[k]
		k++
		switch s[i] {
		case 's':
			b.WriteString(toStr(a).S)
		case 'r':
			b.WriteString(pyRepr(a, 1, newWalk()))
		case 'd', 'i':
			fl, _ := toFloat(a)
			fmt.Fprintf(&b, "%d", int64(fl))
		case 'f':
			fl, _ := toFloat(a)
			fmt.Fprintf(&b, "%f", fl)
		default:
			return nil, errAt(pos, "unsupported format %%%c", s[i])
		}
	}
	return derived(b.String(), f, arg), nil
}
