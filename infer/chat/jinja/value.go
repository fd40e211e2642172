package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Value is a template value: nil (none), bool, int64, float64, Str, *List,
// *Dict, *Namespace, *Macro, *builtin, *loopInfo or Undefined.
type Value any

// Undefined is a missing variable, attribute or item. Looking into it gives
// another Undefined rather than an error, so `x.y is defined` works on any x;
// printing it prints nothing.
type Undefined struct{ Name string }

// span is a byte range [lo, hi) of a string.
type span struct{ lo, hi int }

// Str is a string that remembers which of its bytes came from the caller's
// data (Plain) rather than from the template's own text: a message's
// content stays data wherever the template moves it, so a chat template's
// markers can be told apart from the same characters typed by a user.
type Str struct {
	S     string
	plain []span // sorted, disjoint, non-empty
}

// Text is a trusted string (the template's own).
func Text(s string) Str { return Str{S: s} }

// Data is a string from the caller's data: it stays plain text.
func Data(s string) Str {
	if s == "" {
		return Str{}
	}
	return Str{S: s, plain: []span{{0, len(s)}}}
}

func (s Str) tainted() bool { return len(s.plain) > 0 }

// Segment is a run of a rendered string that is either all template text or
// all data.
type Segment struct {
	Text string
	Data bool
}

// Segments cuts s into runs of template text and data.
func (s Str) Segments() []Segment {
	var out []Segment
	at := 0
	for _, p := range s.plain {
		if p.lo > at {
			out = append(out, Segment{Text: s.S[at:p.lo]})
		}
		out = append(out, Segment{Text: s.S[p.lo:p.hi], Data: true})
		at = p.hi
	}
	if at < len(s.S) {
		out = append(out, Segment{Text: s.S[at:]})
	}
	return out
}

func concatStr(a, b Str) Str {
	if !b.tainted() {
		if !a.tainted() {
			return Str{S: a.S + b.S}
		}
		return Str{S: a.S + b.S, plain: a.plain}
	}
	out := Str{S: a.S + b.S, plain: make([]span, 0, len(a.plain)+len(b.plain))}
	out.plain = append(out.plain, a.plain...)
	n := len(a.S)
	for _, p := range b.plain {
		q := span{p.lo + n, p.hi + n}
		if k := len(out.plain); k > 0 && out.plain[k-1].hi == q.lo {
			out.plain[k-1].hi = q.hi
			continue
		}
		out.plain = append(out.plain, q)
	}
	return out
}

// sub is s[lo:hi] with its taint.
func (s Str) sub(lo, hi int) Str {
	out := Str{S: s.S[lo:hi]}
	for _, p := range s.plain {
		a, b := max(p.lo, lo), min(p.hi, hi)
		if a < b {
			out.plain = append(out.plain, span{a - lo, b - lo})
		}
	}
	return out
}

// mapped is f applied to s: per segment, so the taint stays where it was.
func (s Str) mapped(f func(string) string) Str {
	if !s.tainted() {
		return Str{S: f(s.S)}
	}
	var w writer
	for _, seg := range s.Segments() {
		if seg.Data {
			w.write(Data(f(seg.Text)))
		} else {
			w.write(Text(f(seg.Text)))
		}
	}
	return w.str()
}

// derived is a new string computed from inputs: data if any input was.
func derived(s string, from ...Value) Str {
	w := newWalk()
	for _, v := range from {
		if isTainted(v, 0, w) {
			return Data(s)
		}
	}
	return Text(s)
}

// walk bounds a traversal of nested values: a template can build lists
// that hold themselves, or one list many times over, and a walk through
// those stops after a fixed number of nodes instead of running on.
type walk struct{ left int }

const walkNodes = 1 << 16

func newWalk() *walk { return &walk{left: walkNodes} }

// visit takes one node from the budget; false when it is spent.
func (w *walk) visit() bool {
	w.left--
	return w.left >= 0
}

func isTainted(v Value, depth int, w *walk) bool {
	if depth > 64 || !w.visit() {
		return true
	}
	switch x := v.(type) {
	case Str:
		return x.tainted()
	case *List:
		for _, e := range x.Items {
			if isTainted(e, depth+1, w) {
				return true
			}
		}
	case *Dict:
		for _, k := range x.keys {
			if isTainted(x.m[k], depth+1, w) {
				return true
			}
		}
	}
	return false
}

// List is a mutable list (append works on it).
type List struct{ Items []Value }

// Dict is a map that keeps its keys in insertion order, as Python's does
// (tojson and items() follow it).
type Dict struct {
	keys []string
	m    map[string]Value
	orig map[string]Value // a key that is not a string ({1024: 256}), by its text
}

// NewDict makes an empty Dict.
func NewDict() *Dict { return &Dict{m: map[string]Value{}} }

// Set adds or replaces key.
func (d *Dict) Set(k string, v Value) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// setKey adds or replaces a key of any type; non-strings are kept by
// their text, and given back as themselves when the dict is walked.
func (d *Dict) setKey(k, v Value) {
	ks := toStr(k).S
	if _, isStr := k.(Str); !isStr {
		if d.orig == nil {
			d.orig = map[string]Value{}
		}
		d.orig[ks] = k
	}
	d.Set(ks, v)
}

// keyValue is key k as a value: the original for a non-string key, else a
// string that is data when data is set.
func (d *Dict) keyValue(k string, data bool) Value {
	if o, ok := d.orig[k]; ok {
		return o
	}
	if data {
		return Data(k)
	}
	return Text(k)
}

// Get looks key up.
func (d *Dict) Get(k string) (Value, bool) { v, ok := d.m[k]; return v, ok }

// Keys are the keys in insertion order.
func (d *Dict) Keys() []string { return d.keys }

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Namespace is what namespace() returns: attributes a loop body may set.
type Namespace struct{ d *Dict }

// Macro is a {% macro %} with its defining scope.
type Macro struct {
	name     string
	params   []param
	body     []node
	scope    *scope
	isCaller bool
}

type builtin struct {
	name string
	recv Value // a method's receiver, whose size its call costs
	fn   func(e *evaluator, pos Pos, args []Value, kw *Dict) (Value, error)
}

// loopInfo is the `loop` variable of a for loop.
type loopInfo struct {
	index0, length int
	items          []Value
}

func truthy(v Value) bool {
	switch x := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case Str:
		return x.S != ""
	case *List:
		return len(x.Items) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}

func typeName(v Value) string {
	switch v.(type) {
	case nil:
		return "none"
	case Undefined:
		return "undefined"
	case bool:
		return "boolean"
	case int64:
		return "integer"
	case float64:
		return "float"
	case Str:
		return "string"
	case *List:
		return "list"
	case *Dict:
		return "dict"
	case *Namespace:
		return "namespace"
	case *Macro, *builtin:
		return "function"
	case *loopInfo:
		return "loop"
	}
	return fmt.Sprintf("%T", v)
}

// toStr is str(v) as Python (and Jinja's output) writes it.
func toStr(v Value) Str {
	switch x := v.(type) {
	case Str:
		return x
	case Undefined:
		return Str{}
	case *List, *Dict:
		return derived(pyRepr(v, 0, newWalk()), v)
	}
	return Text(pyRepr(v, 0, newWalk()))
}

// pyRepr writes v as Python's str/repr would (strings quoted inside
// containers). The walk bounds the nodes it visits and, through bytes, what
// it writes: past walkBytes it stops, and the caller's output cap refuses
// the result.
func pyRepr(v Value, depth int, w *walk) string {
	var b strings.Builder
	writeRepr(&b, v, depth, w)
	return b.String()
}

const walkBytes = 16 << 20

func writeRepr(b *strings.Builder, v Value, depth int, w *walk) {
	if depth > 64 || !w.visit() || b.Len() > walkBytes {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case Str:
		if depth == 0 {
			b.WriteString(x.S)
		} else {
			b.WriteString(pyQuote(x.S))
		}
	case *List:
		b.WriteByte('[')
		for i, e := range x.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1, w)
		}
		b.WriteByte(']')
	case *Dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x.keyValue(k, false), depth+1, w)
			b.WriteString(": ")
			writeRepr(b, x.m[k], depth+1, w)
		}
		b.WriteByte('}')
	case *Namespace:
		b.WriteString("<Namespace>")
	case *Macro:
		b.WriteString("<macro " + x.name + ">")
	case *builtin:
		b.WriteString("<function " + x.name + ">")
	}
}

func pyQuote(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case string(r) == q:
			b.WriteString(`\` + q)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// pyFloat formats as Python's repr(float): shortest round-trip digits,
// always with a point or exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.Contains(s, "e") {
		// Python writes 1e-05, Go 1e-05 too; both pad the exponent to two digits.
		return s
	}
	return s
}

func toFloat(v Value) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// equal is Python's ==.
func equal(a, b Value, depth int, w ...*walk) bool {
	if len(w) == 0 {
		w = []*walk{newWalk()}
	}
	if depth > 64 || !w[0].visit() {
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case Str:
		y, ok := b.(Str)
		return ok && x.S == y.S
	case bool, int64, float64:
		if _, isStr := b.(Str); isStr {
			return false
		}
		fa, ok1 := toFloat(a)
		fb, ok2 := toFloat(b)
		return ok1 && ok2 && fa == fb
	case *List:
		y, ok := b.(*List)
		if !ok || len(x.Items) != len(y.Items) {
			return false
		}
		for i := range x.Items {
			if !equal(x.Items[i], y.Items[i], depth+1, w[0]) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			v, ok := y.m[k]
			if !ok || !equal(x.m[k], v, depth+1, w[0]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare orders numbers with numbers and strings with strings.
func compare(a, b Value) (int, error) {
	if x, ok := a.(Str); ok {
		if y, ok := b.(Str); ok {
			return strings.Compare(x.S, y.S), nil
		}
	}
	fa, ok1 := toFloat(a)
	fb, ok2 := toFloat(b)
	if ok1 && ok2 {
		switch {
		case fa < fb:
			return -1, nil
		case fa > fb:
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

func sortValues(items []Value, key func(Value) Value, reverse bool) error {
	var err error
	sort.SliceStable(items, func(i, j int) bool {
		c, e := compare(key(items[i]), key(items[j]))
		if e != nil && err == nil {
			err = e
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return err
}
