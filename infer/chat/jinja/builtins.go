package jinja

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

var globals map[string]Value

func init() {
	globals = map[string]Value{
		"range":           &builtin{name: "range", fn: fnRange},
		"namespace":       &builtin{name: "namespace", fn: fnNamespace},
		"dict":            &builtin{name: "dict", fn: fnDict},
		"raise_exception": &builtin{name: "raise_exception", fn: fnRaise},
		"strftime_now":    &builtin{name: "strftime_now", fn: fnStrftimeNow},
	}
}

func fnRange(e *evaluator, pos Pos, args []Value, _ *Dict) (Value, error) {
	var b [3]int64
	b[2] = 1
	for i, a := range args {
		n, ok := a.(int64)
		if !ok || i > 2 {
			return nil, errAt(pos, "range takes up to three integers")
		}
		b[i] = n
	}
	start, stop, step := b[0], b[1], b[2]
	if len(args) == 1 {
		start, stop = 0, b[0]
	}
	if step == 0 {
		return nil, errAt(pos, "range step must not be zero")
	}
	n := int64(0)
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		n = (start - stop - step - 1) / -step
	}
	if n > int64(e.maxOut) {
		return nil, &Error{Pos: pos, Msg: fmt.Sprintf("range of %d items", n), Err: ErrLimit}
	}
	if err := e.items(pos, int(n), int(n)); err != nil {
		return nil, err
	}
	l := &List{Items: make([]Value, 0, n)}
	for i := range n {
		l.Items = append(l.Items, start+i*step)
	}
	return l, nil
}

func fnNamespace(_ *evaluator, _ Pos, args []Value, kw *Dict) (Value, error) {
	ns := &Namespace{d: NewDict()}
	for _, a := range args {
		if d, ok := a.(*Dict); ok {
			for _, k := range d.keys {
				ns.d.Set(k, d.m[k])
			}
		}
	}
	for _, k := range kw.keys {
		ns.d.Set(k, kw.m[k])
	}
	return ns, nil
}

func fnDict(_ *evaluator, _ Pos, args []Value, kw *Dict) (Value, error) {
	d := NewDict()
	for _, a := range args {
		if src, ok := a.(*Dict); ok {
			for _, k := range src.keys {
				d.Set(k, src.m[k])
			}
		}
	}
	for _, k := range kw.keys {
		d.Set(k, kw.m[k])
	}
	return d, nil
}

func fnRaise(_ *evaluator, pos Pos, args []Value, _ *Dict) (Value, error) {
	msg := "raise_exception"
	if len(args) > 0 {
		msg = toStr(args[0]).S
	}
	return nil, &Error{Pos: pos, Msg: msg, Err: ErrRaised}
}

func fnStrftimeNow(e *evaluator, pos Pos, args []Value, _ *Dict) (Value, error) {
	if len(args) != 1 {
		return nil, errAt(pos, "strftime_now takes a format")
	}
	f := toStr(args[0]).S
	if len(f) > 1024 {
		return nil, errAt(pos, "strftime_now format of %d bytes", len(f))
	}
	return Text(strftime(e.now(), f)), nil
}

// method is the bound method name of obj, or nil.
func method(obj Value, name string) *builtin {
	var fn func(e *evaluator, pos Pos, args []Value, kw *Dict) (Value, error)
	switch o := obj.(type) {
	case Str:
		fn = strMethod(o, name)
	case *Dict:
		fn = dictMethod(o, name)
	case *List:
		fn = listMethod(o, name)
	}
	if fn == nil {
		return nil
	}
	return &builtin{name: name, fn: fn, recv: obj}
}

func argStr(args []Value, i int) (Str, bool) {
	if i >= len(args) {
		return Str{}, false
	}
	s, ok := args[i].(Str)
	return s, ok
}

// stripStr trims chars (whitespace when none) from the chosen ends of s.
func stripStr(s Str, args []Value, left, right bool) Str {
	cut := func(r rune) bool { return unicode.IsSpace(r) }
	if c, ok := argStr(args, 0); ok {
		cut = func(r rune) bool { return strings.ContainsRune(c.S, r) }
	}
	lo, hi := 0, len(s.S)
	if left {
		lo = len(s.S) - len(strings.TrimLeftFunc(s.S, cut))
	}
	if right {
		hi = len(strings.TrimRightFunc(s.S, cut))
	}
	if hi < lo {
		return Str{}
	}
	return s.sub(lo, hi)
}

func splitStr(s Str, args []Value, kw *Dict) *List {
	sep, hasSep := argStr(args, 0)
	maxSplit := int64(-1)
	if len(args) > 1 {
		if n, ok := args[1].(int64); ok {
			maxSplit = n
		}
	}
	if v, ok := kw.Get("maxsplit"); ok {
		if n, ok := v.(int64); ok {
			maxSplit = n
		}
	}
	out := &List{}
	if !hasSep || sep.S == "" {
		// Whitespace split: runs of whitespace, none empty.
		i := 0
		for i < len(s.S) && maxSplit != 0 {
			for i < len(s.S) {
				r, n := utf8.DecodeRuneInString(s.S[i:])
				if !unicode.IsSpace(r) {
					break
				}
				i += n
			}
			if i >= len(s.S) {
				break
			}
			j := i
			for j < len(s.S) {
				r, n := utf8.DecodeRuneInString(s.S[j:])
				if unicode.IsSpace(r) {
					break
				}
				j += n
			}
			out.Items = append(out.Items, s.sub(i, j))
			i = j
			maxSplit--
		}
		if i < len(s.S) {
			if rest := stripStr(s.sub(i, len(s.S)), nil, true, false); rest.S != "" {
				out.Items = append(out.Items, rest)
			}
		}
		return out
	}
	at := 0
	for maxSplit != 0 {
		k := strings.Index(s.S[at:], sep.S)
		if k < 0 {
			break
		}
		out.Items = append(out.Items, s.sub(at, at+k))
		at += k + len(sep.S)
		maxSplit--
	}
	out.Items = append(out.Items, s.sub(at, len(s.S)))
	return out
}

func replaceStr(s Str, old, repl Str, count int64) Str {
	if old.S == "" {
		return derived(strings.Replace(s.S, "", repl.S, int(count)), s, repl)
	}
	var w writer
	at := 0
	for count != 0 {
		k := strings.Index(s.S[at:], old.S)
		if k < 0 {
			break
		}
		w.write(s.sub(at, at+k))
		w.write(repl)
		at += k + len(old.S)
		count--
	}
	w.write(s.sub(at, len(s.S)))
	return w.str()
}

// replaceSize bounds the length of replaceStr's result.
func replaceSize(s, old, repl Str) int {
	n := strings.Count(s.S, old.S)
	if old.S == "" {
		n = len(s.S) + 1
	}
	return len(s.S) + n*max(len(repl.S)-len(old.S), 0)
}

func prefixTest(s Str, args []Value, f func(string, string) bool) (Value, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch a := args[0].(type) {
	case Str:
		return f(s.S, a.S), nil
	case *List:
		for _, it := range a.Items {
			if p, ok := it.(Str); ok && f(s.S, p.S) {
				return true, nil
			}
		}
	}
	return false, nil
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

// title is Python's str.title: a cased letter after an uncased character
// starts a word.
func title(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToUpper(r))
		}
		prevCased = unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
	}
	return b.String()
}

var wordStartRE = regexp.MustCompile(`[-\s({\[<]+`)

// titleFilter is Jinja's title filter: words split at spaces, dashes and
// opening brackets, each capitalized.
func titleFilter(s string) string {
	var b strings.Builder
	at := 0
	for _, m := range wordStartRE.FindAllStringIndex(s, -1) {
		b.WriteString(capitalizeFirst(s[at:m[0]]))
		b.WriteString(s[m[0]:m[1]])
		at = m[1]
	}
	b.WriteString(capitalizeFirst(s[at:]))
	return b.String()
}

func capitalizeFirst(w string) string {
	r, n := utf8.DecodeRuneInString(w)
	if n == 0 {
		return w
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(w[n:])
}

func strMethod(s Str, name string) func(*evaluator, Pos, []Value, *Dict) (Value, error) {
	simple := func(f func([]Value, *Dict) Value) func(*evaluator, Pos, []Value, *Dict) (Value, error) {
		return func(_ *evaluator, _ Pos, args []Value, kw *Dict) (Value, error) { return f(args, kw), nil }
	}
	switch name {
	case "strip":
		return simple(func(a []Value, _ *Dict) Value { return stripStr(s, a, true, true) })
	case "lstrip":
		return simple(func(a []Value, _ *Dict) Value { return stripStr(s, a, true, false) })
	case "rstrip":
		return simple(func(a []Value, _ *Dict) Value { return stripStr(s, a, false, true) })
	case "split":
		return func(e *evaluator, pos Pos, a []Value, kw *Dict) (Value, error) {
			n := len(s.S)/2 + 1 // whitespace split: at most this many words
			if sep, ok := argStr(a, 0); ok && sep.S != "" {
				n = strings.Count(s.S, sep.S) + 1
			}
			if err := e.items(pos, n, n); err != nil {
				return nil, err
			}
			return splitStr(s, a, kw), nil
		}
	case "splitlines":
		return simple(func([]Value, *Dict) Value {
			out := &List{}
			at := 0
			for i := 0; i < len(s.S); i++ {
				if s.S[i] == '\n' || s.S[i] == '\r' {
					out.Items = append(out.Items, s.sub(at, i))
					if s.S[i] == '\r' && i+1 < len(s.S) && s.S[i+1] == '\n' {
						i++
					}
					at = i + 1
				}
			}
			if at < len(s.S) {
				out.Items = append(out.Items, s.sub(at, len(s.S)))
			}
			return out
		})
	case "startswith":
		return func(_ *evaluator, _ Pos, a []Value, _ *Dict) (Value, error) {
			return prefixTest(s, a, strings.HasPrefix)
		}
	case "endswith":
		return func(_ *evaluator, _ Pos, a []Value, _ *Dict) (Value, error) {
			return prefixTest(s, a, strings.HasSuffix)
		}
	case "upper":
		return simple(func([]Value, *Dict) Value { return s.mapped(strings.ToUpper) })
	case "lower":
		return simple(func([]Value, *Dict) Value { return s.mapped(strings.ToLower) })
	case "title":
		return simple(func([]Value, *Dict) Value { return derived(title(s.S), s) })
	case "capitalize":
		return simple(func([]Value, *Dict) Value { return derived(capitalize(s.S), s) })
	case "replace":
		return func(e *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			old, ok1 := argStr(a, 0)
			repl, ok2 := argStr(a, 1)
			if !ok1 || !ok2 {
				return nil, errAt(pos, "replace takes two strings")
			}
			count := int64(-1)
			if len(a) > 2 {
				count, _ = a[2].(int64)
			}
			if err := e.grow(pos, replaceSize(s, old, repl)); err != nil {
				return nil, err
			}
			return replaceStr(s, old, repl, count), nil
		}
	case "find", "rfind", "index", "count":
		return func(_ *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			sub, ok := argStr(a, 0)
			if !ok {
				return nil, errAt(pos, "%s takes a string", name)
			}
			var k int
			switch name {
			case "count":
				return int64(strings.Count(s.S, sub.S)), nil
			case "rfind":
				k = strings.LastIndex(s.S, sub.S)
			default:
				k = strings.Index(s.S, sub.S)
			}
			if k < 0 {
				if name == "index" {
					return nil, errAt(pos, "substring not found")
				}
				return int64(-1), nil
			}
			return int64(utf8.RuneCountInString(s.S[:k])), nil
		}
	case "join":
		return func(e *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			if len(a) != 1 {
				return nil, errAt(pos, "join takes one list")
			}
			items, err := e.iterate(pos, a[0])
			if err != nil {
				return nil, err
			}
			return joinValues(e, pos, items, s)
		}
	case "removeprefix", "removesuffix":
		return simple(func(a []Value, _ *Dict) Value {
			p, _ := argStr(a, 0)
			if name == "removeprefix" && strings.HasPrefix(s.S, p.S) {
				return s.sub(len(p.S), len(s.S))
			}
			if name == "removesuffix" && strings.HasSuffix(s.S, p.S) {
				return s.sub(0, len(s.S)-len(p.S))
			}
			return s
		})
	case "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower":
		return simple(func([]Value, *Dict) Value {
			if s.S == "" {
				return false
			}
			cased := false
			for _, r := range s.S {
				var ok bool
				switch name {
				case "isdigit":
					ok = unicode.IsDigit(r)
				case "isalpha":
					ok = unicode.IsLetter(r)
				case "isalnum":
					ok = unicode.IsLetter(r) || unicode.IsDigit(r)
				case "isspace":
					ok = unicode.IsSpace(r)
				case "isupper":
					ok, cased = !unicode.IsLower(r), cased || unicode.IsUpper(r)
				case "islower":
					ok, cased = !unicode.IsUpper(r), cased || unicode.IsLower(r)
				}
				if !ok {
					return false
				}
			}
			return cased || (name != "isupper" && name != "islower")
		})
	case "format":
		return func(_ *evaluator, pos Pos, a []Value, kw *Dict) (Value, error) {
			var b strings.Builder
			k := 0
			f := s.S
			for i := 0; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i:], "{{"), strings.HasPrefix(f[i:], "}}"):
					b.WriteByte(f[i])
					i++
				case f[i] == '{':
					j := strings.IndexByte(f[i:], '}')
					if j < 0 {
						return nil, errAt(pos, "bad format string")
					}
					field := f[i+1 : i+j]
					var v Value = Undefined{}
					if field == "" {
						if k < len(a) {
							v = a[k]
						}
						k++
					} else if n, err := strconv.Atoi(field); err == nil && n < len(a) {
						v = a[n]
					} else if x, ok := kw.Get(field); ok {
						v = x
					}
					b.WriteString(toStr(v).S)
					i += j
				default:
					b.WriteByte(f[i])
				}
			}
			all := append([]Value{s}, a...)
			for _, k := range kw.keys {
				all = append(all, kw.m[k])
			}
			return derived(b.String(), all...), nil
		}
	}
	return nil
}

func dictMethod(d *Dict, name string) func(*evaluator, Pos, []Value, *Dict) (Value, error) {
	switch name {
	case "items":
		return func(*evaluator, Pos, []Value, *Dict) (Value, error) { return dictItems(d), nil }
	case "keys":
		return func(*evaluator, Pos, []Value, *Dict) (Value, error) {
			l := &List{}
			data := isTainted(d, 0, newWalk())
			for _, k := range d.keys {
				l.Items = append(l.Items, d.keyValue(k, data))
			}
			return l, nil
		}
	case "values":
		return func(*evaluator, Pos, []Value, *Dict) (Value, error) {
			l := &List{}
			for _, k := range d.keys {
				l.Items = append(l.Items, d.m[k])
			}
			return l, nil
		}
	case "get":
		return func(_ *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			if len(a) == 0 {
				return nil, errAt(pos, "get takes a key")
			}
			if k, ok := a[0].(Str); ok {
				if v, ok := d.m[k.S]; ok {
					return v, nil
				}
			}
			if len(a) > 1 {
				return a[1], nil
			}
			return nil, nil
		}
	case "update":
		return func(_ *evaluator, _ Pos, a []Value, kw *Dict) (Value, error) {
			for _, x := range a {
				if src, ok := x.(*Dict); ok {
					for _, k := range src.keys {
						d.Set(k, src.m[k])
					}
				}
			}
			for _, k := range kw.keys {
				d.Set(k, kw.m[k])
			}
			return nil, nil
		}
	case "copy":
		return func(*evaluator, Pos, []Value, *Dict) (Value, error) {
			c := NewDict()
			for _, k := range d.keys {
				c.Set(k, d.m[k])
			}
			return c, nil
		}
	}
	return nil
}

func dictItems(d *Dict) *List {
	l := &List{}
	data := isTainted(d, 0, newWalk())
	for _, k := range d.keys {
		l.Items = append(l.Items, &List{Items: []Value{d.keyValue(k, data), d.m[k]}})
	}
	return l
}

func listMethod(l *List, name string) func(*evaluator, Pos, []Value, *Dict) (Value, error) {
	switch name {
	case "append":
		return func(e *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			if len(a) != 1 {
				return nil, errAt(pos, "append takes one value")
			}
			if err := e.items(pos, len(l.Items)+1, 1); err != nil {
				return nil, err
			}
			l.Items = append(l.Items, a[0])
			return nil, nil
		}
	case "extend":
		return func(e *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			if len(a) != 1 {
				return nil, errAt(pos, "extend takes one list")
			}
			items, err := e.iterate(pos, a[0])
			if err != nil {
				return nil, err
			}
			if err := e.items(pos, len(l.Items)+len(items), len(items)); err != nil {
				return nil, err
			}
			l.Items = append(l.Items, items...)
			return nil, nil
		}
	case "pop":
		return func(_ *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			if len(l.Items) == 0 {
				return nil, errAt(pos, "pop from an empty list")
			}
			i := int64(len(l.Items) - 1)
			if len(a) > 0 {
				i, _ = a[0].(int64)
				if i < 0 {
					i += int64(len(l.Items))
				}
			}
			if i < 0 || i >= int64(len(l.Items)) {
				return nil, errAt(pos, "pop index out of range")
			}
			v := l.Items[i]
			l.Items = append(l.Items[:i:i], l.Items[i+1:]...)
			return v, nil
		}
	case "index", "count":
		return func(_ *evaluator, pos Pos, a []Value, _ *Dict) (Value, error) {
			if len(a) == 0 {
				return nil, errAt(pos, "%s takes a value", name)
			}
			n := int64(0)
			for i, it := range l.Items {
				if equal(it, a[0], 0) {
					if name == "index" {
						return int64(i), nil
					}
					n++
				}
			}
			if name == "index" {
				return nil, errAt(pos, "value not in list")
			}
			return n, nil
		}
	}
	return nil
}

func joinValues(e *evaluator, pos Pos, items []Value, sep Str) (Value, error) {
	var w writer
	for i, it := range items {
		if i > 0 {
			w.write(sep)
		}
		s := toStr(it)
		if err := e.grow(pos, w.b.Len()+len(s.S)+len(sep.S)); err != nil {
			return nil, err
		}
		w.write(s)
	}
	return w.str(), nil
}

// applyFilter runs `arg | f(args)`.
func (e *evaluator) applyFilter(f *filterExpr, arg Value, sc *scope) (Value, error) {
	args, kw, err := e.evalArgs(f.call, sc)
	if err != nil {
		return nil, err
	}
	return e.filter(f.pos, f.name, arg, args, kw)
}

func kwOr(kw *Dict, args []Value, i int, name string) (Value, bool) {
	if i < len(args) {
		return args[i], true
	}
	return kw.Get(name)
}

var tagRE = regexp.MustCompile(`(?s)<!--.*?-->|<[^>]*>`)

func (e *evaluator) filter(pos Pos, name string, v Value, args []Value, kw *Dict) (Value, error) {
	var err error
	switch name {
	case "length", "count", "first", "last", "default", "d", "int", "float", "abs", "round", "safe", "attr":
		err = e.step(pos) // constant work
	case "tojson", "string", "unique", "join", "sort", "map", "selectattr", "rejectattr", "select", "reject", "dictsort":
		err = e.deepCost(pos, v)
	default:
		err = e.cost(pos, v)
	}
	if err != nil {
		return nil, err
	}
	switch name {
	case "trim":
		return stripStr(toStr(v), args, true, true), nil
	case "upper":
		return toStr(v).mapped(strings.ToUpper), nil
	case "lower":
		return toStr(v).mapped(strings.ToLower), nil
	case "capitalize":
		return derived(capitalize(toStr(v).S), v), nil
	case "title":
		return derived(titleFilter(toStr(v).S), v), nil
	case "length", "count":
		switch x := v.(type) {
		case Str:
			return int64(utf8.RuneCountInString(x.S)), nil
		case *List:
			return int64(len(x.Items)), nil
		case *Dict:
			return int64(x.Len()), nil
		case Undefined, nil:
			return int64(0), nil
		}
		return nil, errAt(pos, "%s has no length", typeName(v))
	case "string":
		return toStr(v), nil
	case "safe", "escape", "e", "forceescape":
		if name == "safe" {
			return v, nil
		}
		s := toStr(v)
		return s.mapped(func(t string) string {
			return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(t)
		}), nil
	case "int":
		def := int64(0)
		if d, ok := kwOr(kw, args, 0, "default"); ok {
			def, _ = d.(int64)
		}
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		case bool:
			return boolInt(x), nil
		case Str:
			if n, err := strconv.ParseInt(strings.TrimSpace(x.S), 10, 64); err == nil {
				return n, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(x.S), 64); err == nil {
				return int64(f), nil
			}
		}
		return def, nil
	case "float":
		switch x := v.(type) {
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		case Str:
			if f, err := strconv.ParseFloat(strings.TrimSpace(x.S), 64); err == nil {
				return f, nil
			}
		}
		return 0.0, nil
	case "abs":
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		}
		return nil, errAt(pos, "abs of %s", typeName(v))
	case "round":
		f, ok := toFloat(v)
		if !ok {
			return nil, errAt(pos, "round of %s", typeName(v))
		}
		prec := int64(0)
		if p, ok := kwOr(kw, args, 0, "precision"); ok {
			prec, _ = p.(int64)
		}
		method := "common"
		if m, ok := kwOr(kw, args, 1, "method"); ok {
			method = toStr(m).S
		}
		scale := math.Pow(10, float64(prec))
		switch method {
		case "ceil":
			return math.Ceil(f*scale) / scale, nil
		case "floor":
			return math.Floor(f*scale) / scale, nil
		}
		return math.Round(f*scale) / scale, nil
	case "default", "d":
		def := Value(Text(""))
		if d, ok := kwOr(kw, args, 0, "default_value"); ok {
			def = d
		}
		boolean := false
		if b, ok := kwOr(kw, args, 1, "boolean"); ok {
			boolean = truthy(b)
		}
		if _, undef := v.(Undefined); undef || boolean && !truthy(v) {
			return def, nil
		}
		return v, nil
	case "first", "last":
		switch x := v.(type) {
		case *List:
			if len(x.Items) == 0 {
				return Undefined{}, nil
			}
			if name == "first" {
				return x.Items[0], nil
			}
			return x.Items[len(x.Items)-1], nil
		case Str:
			if x.S == "" {
				return Undefined{}, nil
			}
			if name == "first" {
				return index(x, int64(0)), nil
			}
			return index(x, int64(-1)), nil
		case *Dict:
			if x.Len() == 0 {
				return Undefined{}, nil
			}
			data := isTainted(x, 0, newWalk())
			if name == "first" {
				return x.keyValue(x.keys[0], data), nil
			}
			return x.keyValue(x.keys[len(x.keys)-1], data), nil
		}
		return Undefined{}, nil
	case "join":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		sep := Str{}
		if s, ok := kwOr(kw, args, 0, "d"); ok {
			sep = toStr(s)
		}
		if a, ok := kwOr(kw, args, 1, "attribute"); ok {
			for i, it := range items {
				items[i] = e.getAttrPath(it, a)
			}
		}
		return joinValues(e, pos, items, sep)
	case "replace":
		if len(args) < 2 {
			return nil, errAt(pos, "replace takes two strings")
		}
		count := int64(-1)
		if len(args) > 2 {
			count, _ = args[2].(int64)
		}
		if err := e.grow(pos, replaceSize(toStr(v), toStr(args[0]), toStr(args[1]))); err != nil {
			return nil, err
		}
		return replaceStr(toStr(v), toStr(args[0]), toStr(args[1]), count), nil
	case "items":
		switch x := v.(type) {
		case *Dict:
			return dictItems(x), nil
		case Undefined, nil:
			return &List{}, nil
		}
		return nil, errAt(pos, "items of %s", typeName(v))
	case "dictsort":
		d, ok := v.(*Dict)
		if !ok {
			return nil, errAt(pos, "dictsort of %s", typeName(v))
		}
		l := dictItems(d)
		err := sortValues(l.Items, func(x Value) Value { return x.(*List).Items[0] }, false)
		if err != nil {
			return nil, errAt(pos, "%v", err)
		}
		return l, nil
	case "list":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		return &List{Items: append([]Value{}, items...)}, nil
	case "reverse":
		if s, ok := v.(Str); ok {
			return slice(pos, s, nil, nil, int64(-1))
		}
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		out := &List{Items: make([]Value, len(items))}
		for i, it := range items {
			out.Items[len(items)-1-i] = it
		}
		return out, nil
	case "sort":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		out := &List{Items: append([]Value{}, items...)}
		reverse := false
		if r, ok := kwOr(kw, args, 0, "reverse"); ok {
			reverse = truthy(r)
		}
		key := func(x Value) Value { return x }
		if a, ok := kw.Get("attribute"); ok {
			key = func(x Value) Value { return e.getAttrPath(x, a) }
		}
		if err := sortValues(out.Items, key, reverse); err != nil {
			return nil, errAt(pos, "%v", err)
		}
		return out, nil
	case "unique":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		out := &List{}
		for _, it := range items {
			e.steps += len(out.Items)
			if err := e.step(pos); err != nil {
				return nil, err
			}
			dup := false
			for _, seen := range out.Items {
				if equal(seen, it, 0) {
					dup = true
					break
				}
			}
			if !dup {
				out.Items = append(out.Items, it)
			}
		}
		return out, nil
	case "sum", "min", "max":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		if name == "sum" {
			var acc Value = int64(0)
			for _, it := range items {
				if acc, err = arith(pos, "+", acc, it); err != nil {
					return nil, err
				}
			}
			return acc, nil
		}
		if len(items) == 0 {
			return Undefined{}, nil
		}
		best := items[0]
		for _, it := range items[1:] {
			c, err := compare(it, best)
			if err != nil {
				return nil, errAt(pos, "%v", err)
			}
			if name == "min" && c < 0 || name == "max" && c > 0 {
				best = it
			}
		}
		return best, nil
	case "selectattr", "rejectattr", "select", "reject":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		byAttr := strings.HasSuffix(name, "attr")
		want := name == "select" || name == "selectattr"
		out := &List{}
		for _, it := range items {
			subj, rest := it, args
			if byAttr {
				if len(args) == 0 {
					return nil, errAt(pos, "%s needs an attribute", name)
				}
				subj, rest = e.getAttrPath(it, args[0]), args[1:]
			}
			ok := truthy(subj)
			if len(rest) > 0 {
				testName := toStr(rest[0]).S
				if ok, err = e.test(pos, testName, subj, rest[1:]); err != nil {
					return nil, err
				}
			}
			if ok == want {
				out.Items = append(out.Items, it)
			}
		}
		return out, nil
	case "map":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		out := &List{}
		if a, ok := kw.Get("attribute"); ok {
			def, hasDef := kw.Get("default")
			for _, it := range items {
				x := e.getAttrPath(it, a)
				if _, undef := x.(Undefined); undef && hasDef {
					x = def
				}
				out.Items = append(out.Items, x)
			}
			return out, nil
		}
		if len(args) == 0 {
			return nil, errAt(pos, "map needs a filter name or attribute=")
		}
		fname := toStr(args[0]).S
		for _, it := range items {
			x, err := e.filter(pos, fname, it, args[1:], NewDict())
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, x)
		}
		return out, nil
	case "attr":
		if len(args) == 0 {
			return nil, errAt(pos, "attr needs a name")
		}
		return e.getAttr(v, toStr(args[0]).S), nil
	case "tojson":
		indent := -1
		if i, ok := kwOr(kw, args, 0, "indent"); ok {
			if n, ok := i.(int64); ok {
				indent = int(min(max(n, 0), 64))
			}
		}
		sortKeys := false
		if s, ok := kw.Get("sort_keys"); ok {
			sortKeys = truthy(s)
		}
		seps := [2]string{", ", ": "}
		if indent >= 0 {
			seps[0] = ","
		}
		if sv, ok := kw.Get("separators"); ok {
			if l, ok := sv.(*List); ok && len(l.Items) == 2 {
				seps = [2]string{toStr(l.Items[0]).S, toStr(l.Items[1]).S}
			}
		}
		var b strings.Builder
		if err := writeJSON(&b, v, jsonStyle{indent: indent, sortKeys: sortKeys, item: seps[0], key: seps[1]}, 0, e.maxOut); err != nil {
			if errors.Is(err, errTooLarge) {
				return nil, &Error{Pos: pos, Msg: "tojson: " + err.Error(), Err: ErrLimit}
			}
			return nil, errAt(pos, "tojson: %v", err)
		}
		return derived(b.String(), v), nil
	case "indent":
		width := Value(int64(4))
		if w, ok := kwOr(kw, args, 0, "width"); ok {
			width = w
		}
		pad := ""
		switch w := width.(type) {
		case int64:
			pad = strings.Repeat(" ", int(min(max(w, 0), 256)))
		case Str:
			pad = w.S
		}
		first, blank := false, false
		if f, ok := kwOr(kw, args, 1, "first"); ok {
			first = truthy(f)
		}
		if b, ok := kwOr(kw, args, 2, "blank"); ok {
			blank = truthy(b)
		}
		s := toStr(v)
		if err := e.grow(pos, len(s.S)+(strings.Count(s.S, "\n")+1)*len(pad)); err != nil {
			return nil, err
		}
		lines := strings.Split(s.S, "\n")
		for i, l := range lines {
			if (i > 0 || first) && (blank || l != "") {
				lines[i] = pad + l
			}
		}
		return derived(strings.Join(lines, "\n"), v), nil
	case "striptags":
		s := tagRE.ReplaceAllString(toStr(v).S, "")
		return derived(strings.Join(strings.Fields(s), " "), v), nil
	case "wordcount":
		return int64(len(strings.Fields(toStr(v).S))), nil
	case "truncate":
		s := toStr(v)
		n := int64(255)
		if l, ok := kwOr(kw, args, 0, "length"); ok {
			n, _ = l.(int64)
		}
		r := []rune(s.S)
		if int64(len(r)) <= n || n < 0 {
			return s, nil
		}
		return derived(string(r[:n])+"...", v), nil
	case "format":
		if s, ok := v.(Str); ok {
			return pyFormat(pos, s, &List{Items: args})
		}
	case "batch":
		items, err := e.iterate(pos, v)
		if err != nil {
			return nil, err
		}
		n, _ := kwOr(kw, args, 0, "linecount")
		size, ok := n.(int64)
		if !ok || size <= 0 {
			return nil, errAt(pos, "batch needs a positive size")
		}
		out := &List{}
		for i := 0; i < len(items); i += int(size) {
			out.Items = append(out.Items, &List{Items: append([]Value{}, items[i:min(i+int(size), len(items))]...)})
		}
		return out, nil
	}
	return nil, errAt(pos, "unknown filter %q", name)
}

// getAttrPath looks up "a.b.c" (or an integer index) in v.
func (e *evaluator) getAttrPath(v Value, path Value) Value {
	if i, ok := path.(int64); ok {
		return index(v, i)
	}
	for _, part := range strings.Split(toStr(path).S, ".") {
		if n, err := strconv.Atoi(part); err == nil {
			v = index(v, int64(n))
			continue
		}
		x := index(v, Text(part))
		if _, undef := x.(Undefined); undef {
			x = e.getAttr(v, part)
		}
		v = x
	}
	return v
}

func (e *evaluator) evalTest(x *testExpr, sc *scope) (Value, error) {
	v, err := e.eval(x.arg, sc)
	if err != nil {
		return nil, err
	}
	args := make([]Value, 0, len(x.args))
	for _, a := range x.args {
		av, err := e.eval(a, sc)
		if err != nil {
			return nil, err
		}
		args = append(args, av)
	}
	ok, err := e.test(x.pos, x.name, v, args)
	if err != nil {
		return nil, err
	}
	return ok != x.neg, nil
}

func (e *evaluator) test(pos Pos, name string, v Value, args []Value) (bool, error) {
	arg := func() (Value, error) {
		if len(args) == 0 {
			return nil, errAt(pos, "test %q needs an argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, undef := v.(Undefined)
		return !undef, nil
	case "undefined":
		_, undef := v.(Undefined)
		return undef, nil
	case "none":
		return v == nil, nil
	case "string":
		_, ok := v.(Str)
		return ok, nil
	case "number":
		switch v.(type) {
		case int64, float64:
			return true, nil
		}
		return false, nil
	case "integer":
		_, ok := v.(int64)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true":
		b, ok := v.(bool)
		return ok && b, nil
	case "false":
		b, ok := v.(bool)
		return ok && !b, nil
	case "mapping":
		switch v.(type) {
		case *Dict, *Namespace:
			return true, nil
		}
		return false, nil
	case "iterable":
		switch v.(type) {
		case *List, *Dict, Str:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case *List, Str, *Dict:
			return true, nil
		}
		return false, nil
	case "callable":
		switch v.(type) {
		case *Macro, *builtin:
			return true, nil
		}
		return false, nil
	case "odd", "even":
		n, ok := v.(int64)
		if !ok {
			return false, errAt(pos, "%s test of %s", name, typeName(v))
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		a, err := arg()
		if err != nil {
			return false, err
		}
		n, ok1 := v.(int64)
		d, ok2 := a.(int64)
		if !ok1 || !ok2 || d == 0 {
			return false, errAt(pos, "divisibleby needs non-zero integers")
		}
		return n%d == 0, nil
	case "lower":
		s, ok := v.(Str)
		return ok && strings.ToLower(s.S) == s.S, nil
	case "upper":
		s, ok := v.(Str)
		return ok && strings.ToUpper(s.S) == s.S, nil
	case "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		switch x := v.(type) {
		case *List, *Dict, *Namespace:
			return v == a, nil
		case nil, bool:
			return equal(x, a, 0) && fmt.Sprintf("%T", v) == fmt.Sprintf("%T", a), nil
		}
		return equal(v, a, 0), nil
	case "in":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return contains(pos, a, v)
	case "escaped":
		return false, nil
	case "filter", "test":
		return false, nil
	}
	ops := map[string]string{"equalto": "==", "eq": "==", "==": "==", "ne": "!=", "!=": "!=",
		"lt": "<", "<": "<", "lessthan": "<", "gt": ">", ">": ">", "greaterthan": ">", "le": "<=", "<=": "<=", "ge": ">=", ">=": ">="}
	if op, ok := ops[name]; ok {
		a, err := arg()
		if err != nil {
			return false, err
		}
		r, err := e.binary(pos, op, v, a)
		if err != nil {
			return false, err
		}
		return r.(bool), nil
	}
	return false, errAt(pos, "unknown test %q", name)
}
