package grammar

import "sort"

// Machine recognizes, byte by byte, the JSON texts a Schema allows: a
// pushdown automaton whose stack holds one frame per open value. A frame
// that could end or go on (a number, an enum value that is a prefix of
// another) ends when a byte it cannot take comes, which is then fed to the
// frame below. A value of a union (anyOf) is read by every alternative at
// once, each on its own copy of the stack, until all but one have failed:
// the machine holds a list of stacks, one in the common case. The zero
// Machine accepts nothing.
type Machine struct {
	st   []frame // the stacks, one after another
	ends []int   // ends[i]: where stack i ends in st
	// Feed's scratch, for the next stacks.
	nst  []frame
	nend []int
}

// stack is one reading of the text so far.
type stack struct {
	st []frame
	// fork says feed stopped at a union's value, which the byte starts:
	// each alternative must take it on a copy of the stack.
	fork bool
}

// maxStacks bounds the readings a machine follows at once (a union of
// tool calls starts with one a tool; OpenAI allows 128 tools). Keeping only
// some of them leaves a text that validates (each stack is a complete
// reading), so past the bound the later alternatives are dropped.
const maxStacks = 256

type kind uint8

const (
	kValue   kind = iota // a value of s, not started: whitespace, then its first byte picks the kind
	kObject              // after '{'
	kArray               // after '['
	kString              // after '"'
	kNumber              // digits so far
	kLiteral             // a prefix of one of lits
)

// Object, array and number states.
const (
	oOpen  = iota // after '{': a key or '}'
	oKey          // after ',': a key
	oColon        // after a key: ':'
	oAfter        // after a value: ',' or '}'

	aOpen  = iota - 4 // after '[': a value or ']'
	aNext             // after ',': a value
	aAfter            // after a value: ',' or ']'

	nStart = iota - 7 // bounded numbers: seen holds the integer part, n the fraction, lo and hi their digits, pos the sign
	nMinus
	nZero
	nInt
	nFrac0
	nFrac
	nExp0
	nExpSign
	nExp
)

// maxNesting bounds the open objects and arrays: a mask copies the stack
// for each byte it tries, so a reply nested a thousand deep (json_object,
// a recursive $ref) made every step cost a thousand times more. It is
// above what a schema's own nesting (maxDepth) can require.
const maxNesting = 2 * maxDepth

// Limits that keep a sampled reply from running on forever inside one
// token class.
const (
	maxIndent    = 16 // spaces or tabs after a newline in a gap
	maxIntDigits = 16
	maxFracDigit = 16
	maxExpDigits = 2
)

type frame struct {
	kind  kind
	s     *Schema
	state int8
	ws    int8   // the whitespace of the gap here (space)
	esc   int8   // string: 1 after '\', 2…5 hex digits of \u left +1
	utf   int8   // string: UTF-8 continuation bytes due
	n     int    // object: the property being read (−1: an extra key); array: items; string: characters; number: digits of the part
	seen  uint64 // object: the properties given
	// markup: a literal of the text around the value (NewWrapped's), which
	// a control token may spell
	markup bool
	lits   []string
	lo     int // literal: lits[lo:hi] match the bytes so far
	hi     int
	pos    int
}

// NewMachine recognizes a value of s.
// The text starts with the value itself, no whitespace.
func NewMachine(s *Schema) *Machine {
	return &Machine{st: []frame{{kind: kValue, s: s, ws: wsDone}}, ends: []int{1}}
}

// NewWrapped recognizes prefix, a value of s, then suffix: a tool call
// "<tool_call>\n{…}\n</tool_call>" for instance.
func NewWrapped(prefix string, s *Schema, suffix string) *Machine {
	var st []frame
	if suffix != "" {
		st = append(st, markup(suffix))
	}
	st = append(st, frame{kind: kValue, s: s, ws: wsDone})
	if prefix != "" {
		st = append(st, markup(prefix))
	}
	return &Machine{st: st, ends: []int{len(st)}}
}

// NewWrappedSpaced is NewWrapped with a space (or a newline and an
// indentation) allowed between the prefix and the value: what a
// SentencePiece model writes after a control token, whose text it starts
// with its space ("[TOOL_CALLS] [{…}]").
func NewWrappedSpaced(prefix string, s *Schema, suffix string) *Machine {
	m := NewWrapped(prefix, s, suffix)
	for i := range m.st {
		if m.st[i].kind == kValue {
			m.st[i].ws = 0
		}
	}
	return m
}

// Union recognizes what any of ms recognizes: their readings side by side
// (a call of one of several tools whose name is in the markup,
// "[TOOL_CALLS]name[ARGS]{…}"), at most maxStacks of them.
func Union(ms ...*Machine) *Machine {
	u := &Machine{}
	for _, m := range ms {
		b := 0
		for _, e := range m.ends {
			if len(u.ends) == maxStacks {
				return u
			}
			u.st = append(u.st, m.st[b:e]...)
			u.ends = append(u.ends, len(u.st))
			b = e
		}
	}
	return u
}

func markup(s string) frame {
	f := literal([]string{s})
	f.markup = true
	return f
}

// atMarkup says every reading of the text so far is inside the markup
// around the value, where a control token ([TOOL_CALLS]) may come: never
// inside the JSON, whose strings would otherwise take one as its text.
func (m *Machine) atMarkup() bool {
	b := 0
	for _, e := range m.ends {
		if e == b || m.st[e-1].kind != kLiteral || !m.st[e-1].markup {
			return false
		}
		b = e
	}
	return len(m.ends) > 0
}

func literal(lits []string) frame { return frame{kind: kLiteral, lits: lits, hi: len(lits)} }

// CopyFrom makes m the same state as o, reusing m's storage.
func (m *Machine) CopyFrom(o *Machine) {
	m.st = append(m.st[:0], o.st...)
	m.ends = append(m.ends[:0], o.ends...)
}

// CanEnd says the bytes so far are a whole text.
func (m *Machine) CanEnd() bool {
	b := 0
	for _, e := range m.ends {
		switch e - b {
		case 0:
			return true
		case 1:
			if completable(&m.st[b]) {
				return true
			}
		}
		b = e
	}
	return false
}

// Feed advances past p; on false the machine is left in an unspecified
// state (feed a copy when the bytes may not fit).
func (m *Machine) Feed(p string) bool {
	for i := 0; i < len(p); i++ {
		if !m.feed(p[i]) {
			return false
		}
	}
	return true
}

// feed advances every stack past c, dropping those that cannot take it
// and forking those at a union's value.
func (m *Machine) feed(c byte) bool {
	if len(m.ends) == 1 { // the common case, in place
		s := stack{st: m.st}
		ok := s.feed(c)
		m.st = s.st
		m.ends[0] = len(s.st)
		if ok {
			return true
		}
		if !s.fork {
			m.st, m.ends = m.st[:0], m.ends[:0]
			return false
		}
	}
	out, ends := m.nst[:0], m.nend[:0]
	b := 0
	for _, e := range m.ends {
		base := len(out)
		out = append(out, m.st[b:e]...)
		out, ends = advance(out, ends, base, c)
		b = e
	}
	m.st, m.nst = out, m.st
	m.ends, m.nend = ends, m.ends
	return len(m.ends) > 0
}

// advance feeds c to the stack out[base:], the last in out, and leaves in
// out and ends what comes of it: nothing, the stack, or a stack for each
// alternative of the union it reached.
func advance(out []frame, ends []int, base int, c byte) ([]frame, []int) {
	s := stack{st: out[base:]}
	ok := s.feed(c)
	out = append(out[:base], s.st...)
	switch {
	case ok:
		if len(ends) >= maxStacks {
			return out[:base], ends
		}
		return out, append(ends, len(out))
	case !s.fork:
		return out[:base], ends
	}
	// out[base:] is the stack at the union's value, c not yet taken.
	n := len(out) - base
	first := len(ends)
	for _, alt := range out[len(out)-1].s.alts {
		nb := len(out)
		out = append(out, out[base:base+n]...)
		out[len(out)-1].s = alt
		out, ends = advance(out, ends, nb, c)
	}
	copy(out[base:], out[base+n:])
	out = out[:len(out)-n]
	for i := first; i < len(ends); i++ {
		ends[i] -= n
	}
	return out, ends
}

func completable(f *frame) bool {
	switch f.kind {
	case kNumber:
		if f.s.bounded {
			return inBounds(f)
		}
		return f.state == nZero || f.state == nInt || f.state == nFrac || f.state == nExp
	case kLiteral:
		return f.lo < f.hi && f.pos == len(f.lits[f.lo])
	}
	return false
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func (m *stack) pop() {
	child := m.st[len(m.st)-1]
	m.st = m.st[:len(m.st)-1]
	if len(m.st) == 0 {
		return
	}
	if p := &m.st[len(m.st)-1]; p.kind == kObject && p.state == oColon && child.kind == kLiteral {
		key := child.lits[child.lo]
		for i, pr := range p.s.props {
			if pr.key == key {
				p.n = i
			}
		}
	}
}

func (m *stack) push(f frame) { m.st = append(m.st, f) }

// wsDone marks a gap that takes no more whitespace.
const wsDone = 127

// space takes a whitespace byte in a gap of f. A gap holds one space, or
// a newline and an indentation: what compact and pretty-printed JSON
// have, and no room for a model to fill the reply with blank lines.
func space(f *frame, c byte) bool {
	switch {
	case f.ws == 0 && c == ' ':
		f.ws = wsDone
	case f.ws == 0 && c == '\n':
		f.ws = 1
	case f.ws >= 1 && f.ws <= maxIndent && (c == ' ' || c == '\t'):
		f.ws++
	default:
		return false
	}
	return true
}

func (m *stack) feed(c byte) bool {
	for len(m.st) > 0 {
		f := &m.st[len(m.st)-1]
		switch f.kind {
		case kValue:
			if isWS(c) {
				return space(f, c)
			}
			if f.s.alts != nil {
				m.fork = true
				return false
			}
			if !m.start(f, c) {
				return false
			}
			continue // the frame that replaced the value takes c
		case kLiteral:
			lo, hi := narrow(f.lits, f.lo, f.hi, f.pos, c)
			if lo < hi {
				f.lo, f.hi, f.pos = lo, hi, f.pos+1
				if hi-lo == 1 && f.pos == len(f.lits[lo]) {
					m.pop() // whole and nothing longer: done
				}
				return true
			}
			if completable(f) {
				f.hi = f.lo + 1
				m.pop()
				continue
			}
			return false
		case kString:
			return m.str(f, c)
		case kNumber:
			if number(f, c) {
				return true
			}
			if completable(f) {
				m.pop()
				continue
			}
			return false
		case kObject:
			return m.object(f, c)
		case kArray:
			return m.array(f, c)
		}
	}
	return false
}

// narrow is the range of lits[lo:hi] (sorted, all sharing their first pos
// bytes) whose byte at pos is c, by binary search: a scan cost every
// token of the vocabulary a pass over the literals, and a 75,000-value
// enum made each masked step take a second.
func narrow(lits []string, lo, hi, pos int, c byte) (int, int) {
	// In the range, the literals that end at pos sort first, then by the
	// byte at pos.
	below := func(i int) bool { return len(lits[i]) <= pos || lits[i][pos] < c }
	atMost := func(i int) bool { return len(lits[i]) <= pos || lits[i][pos] <= c }
	from := lo + sort.Search(hi-lo, func(i int) bool { return !below(lo + i) })
	to := lo + sort.Search(hi-lo, func(i int) bool { return !atMost(lo + i) })
	return from, to
}

// start replaces the value frame f by the frame its first byte c opens.
func (m *stack) start(f *frame, c byte) bool {
	s := f.s
	if s.enum != nil {
		*f = literal(s.enum)
		return true
	}
	if (c == '{' || c == '[') && len(m.st) > maxNesting {
		return false
	}
	switch {
	case c == '{' && s.types&tObject != 0:
		*f = frame{kind: kObject, s: s, state: oOpen, n: -1}
		f.ws = -1 // '{' itself: consumed below
	case c == '[' && s.types&tArray != 0:
		*f = frame{kind: kArray, s: s, state: aOpen}
		f.ws = -1
	case c == '"' && s.types&tString != 0:
		*f = frame{kind: kString, s: s}
		f.ws = -1
	case (c == '-' || c >= '0' && c <= '9') && s.types&(tNumber|tInteger) != 0:
		*f = frame{kind: kNumber, s: s, state: nStart}
		return true
	case (c == 't' || c == 'f') && s.types&tBoolean != 0:
		*f = literal([]string{"false", "true"})
		return true
	case c == 'n' && s.types&tNull != 0:
		*f = literal([]string{"null"})
		return true
	default:
		return false
	}
	return true
}

func (m *stack) object(f *frame, c byte) bool {
	if f.ws < 0 { // the '{' that opened it
		f.ws = 0
		return true
	}
	s := f.s
	switch f.state {
	case oOpen, oKey:
		if c == '}' && f.state == oOpen && f.seen&s.required == s.required {
			m.pop()
			return true
		}
		if c != '"' {
			return space(f, c)
		}
		f.ws = 0
		if len(s.props) == 0 {
			if s.extra == nil {
				return false
			}
			f.state, f.n = oColon, -1
			m.push(frame{kind: kString, s: anything})
			return true
		}
		var keys []string
		for i, p := range s.props {
			if f.seen&(1<<i) == 0 {
				keys = append(keys, p.key)
				if s.ordered {
					break // the properties in their order
				}
			}
		}
		if len(keys) == 0 {
			return false
		}
		f.state = oColon
		lit := literal(keys)
		lit.pos = 1 // the quote
		m.push(lit)
		return true
	case oColon:
		if c != ':' {
			return space(f, c)
		}
		f.ws, f.state = 0, oAfter
		vs := s.extra
		if f.n >= 0 {
			vs = s.props[f.n].schema
			f.seen |= 1 << f.n
		}
		m.push(frame{kind: kValue, s: vs})
		return true
	case oAfter:
		switch c {
		case '}':
			if f.seen&s.required != s.required {
				return false
			}
			m.pop()
			return true
		case ',':
			if len(s.props) > 0 && f.seen == 1<<len(s.props)-1 {
				return false // no key left to give
			}
			f.ws, f.state = 0, oKey
			return true
		}
		return space(f, c)
	}
	return false
}

func (m *stack) array(f *frame, c byte) bool {
	if f.ws < 0 {
		f.ws = 0
		return true
	}
	s := f.s
	switch f.state {
	case aOpen, aNext:
		if isWS(c) {
			return space(f, c)
		}
		if c == ']' && f.state == aOpen && s.minItems == 0 {
			m.pop()
			return true
		}
		if s.maxItems >= 0 && f.n >= s.maxItems {
			return false
		}
		f.ws, f.state = 0, aAfter
		item := s.items
		if f.n < len(s.prefix) {
			item = s.prefix[f.n]
		}
		f.n++
		m.push(frame{kind: kValue, s: item})
		return m.feed(c)
	case aAfter:
		switch c {
		case ']':
			if f.n < s.minItems {
				return false
			}
			m.pop()
			return true
		case ',':
			if s.maxItems >= 0 && f.n >= s.maxItems {
				return false
			}
			f.ws, f.state = 0, aNext
			return true
		}
		return space(f, c)
	}
	return false
}

func (m *stack) str(f *frame, c byte) bool {
	if f.ws < 0 { // the opening quote
		f.ws = 0
		return true
	}
	s := f.s
	if s.pat != nil {
		return m.patStr(f, c)
	}
	room := s.maxLen < 0 || f.n < s.maxLen
	switch {
	case f.utf > 0:
		if c < 0x80 || c > 0xBF {
			return false
		}
		f.utf--
		if f.utf == 0 {
			f.n++
		}
	case f.esc == 1:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.esc = 0
			f.n++
		case 'u':
			f.esc = 5
		default:
			return false
		}
	case f.esc > 1:
		if !isHex(c) {
			return false
		}
		f.esc--
		if f.esc == 1 {
			f.esc = 0
			f.n++
		}
	case c == '"':
		if f.n < s.minLen {
			return false
		}
		m.pop()
	case c == '\\':
		if !room {
			return false
		}
		f.esc = 1
	case c < 0x20:
		return false
	case c < 0x80:
		if !room {
			return false
		}
		f.n++
	case c >= 0xC2 && c <= 0xDF:
		if !room {
			return false
		}
		f.utf = 1
	case c >= 0xE0 && c <= 0xEF:
		if !room {
			return false
		}
		f.utf = 2
	case c >= 0xF0 && c <= 0xF4:
		if !room {
			return false
		}
		f.utf = 3
	default:
		return false
	}
	return true
}

// plainString says the machine is inside a string, not within an escape
// or a character, where plain text goes in as it is; room is how many more
// characters the string takes (−1: no limit).
func (m *Machine) plainString() (room int, ok bool) {
	if len(m.ends) != 1 || len(m.st) == 0 {
		return 0, false
	}
	f := &m.st[len(m.st)-1]
	if f.kind != kString || f.ws < 0 || f.esc != 0 || f.utf != 0 || f.s.pat != nil {
		return 0, false
	}
	if f.s.maxLen < 0 {
		return -1, true
	}
	return f.s.maxLen - f.n, true
}

// patString says the machine is inside a string an automaton recognizes,
// between characters: q is the automaton's state, n the characters so far.
func (m *Machine) patString() (q, n int, d *dfa, ok bool) {
	if len(m.ends) != 1 || len(m.st) == 0 {
		return 0, 0, nil, false
	}
	f := &m.st[len(m.st)-1]
	if f.kind != kString || f.ws < 0 || f.esc != 0 || f.utf != 0 || f.s.pat == nil {
		return 0, 0, nil, false
	}
	return f.n, f.hi, f.s.pat, true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// number takes c into a number if it continues one (JSON's grammar; no
// fraction or exponent for an integer).
func number(f *frame, c byte) bool {
	if f.s.bounded {
		return boundedNumber(f, c)
	}
	digit := c >= '0' && c <= '9'
	float := f.s.types&tNumber != 0
	next := func(st int8, limit int) bool {
		if f.state != st {
			f.n = 0
		}
		if f.n >= limit {
			return false
		}
		f.state = st
		f.n++
		return true
	}
	switch f.state {
	case nStart:
		switch {
		case c == '-':
			f.state = nMinus
			return true
		case c == '0':
			f.state = nZero
			return true
		case digit:
			return next(nInt, maxIntDigits)
		}
	case nMinus:
		switch {
		case c == '0':
			f.state = nZero
			return true
		case digit:
			return next(nInt, maxIntDigits)
		}
	case nZero, nInt:
		switch {
		case digit && f.state == nInt:
			return next(nInt, maxIntDigits)
		case c == '.' && float:
			f.state = nFrac0
			return true
		case (c == 'e' || c == 'E') && float:
			f.state = nExp0
			return true
		}
	case nFrac0, nFrac:
		switch {
		case digit:
			return next(nFrac, maxFracDigit)
		case (c == 'e' || c == 'E') && f.state == nFrac:
			f.state = nExp0
			return true
		}
	case nExp0:
		switch {
		case c == '+' || c == '-':
			f.state = nExpSign
			return true
		case digit:
			return next(nExp, maxExpDigits)
		}
	case nExpSign, nExp:
		if digit {
			return next(nExp, maxExpDigits)
		}
	}
	return false
}

// patStr takes c into a string whose characters an automaton recognizes
// (pattern, format): n is its state, hi the characters so far, and a
// character's bytes are taken
// while some character they can still begin leads on. Escapes other than
// \uXXXX are taken; the characters they spell can be written as they are.
func (m *stack) patStr(f *frame, c byte) bool {
	d := f.s.pat
	step := func(r rune) bool {
		q := d.step(f.n, f.hi, r)
		f.n, f.hi = q, f.hi+1
		return q >= 0
	}
	switch {
	case f.utf > 0:
		if c < 0x80 || c > 0xBF {
			return false
		}
		v := f.seen<<6 | uint64(c&0x3F)
		f.utf--
		if f.utf == 0 {
			f.seen = 0
			return rune(v) >= rune(f.lo) && step(rune(v))
		}
		lo := rune(v << (6 * uint(f.utf)))
		hi := lo | (1<<(6*uint(f.utf)) - 1)
		f.seen = v
		return max(lo, rune(f.lo)) <= hi && d.takes(f.n, f.hi, max(lo, rune(f.lo)), hi)
	case f.esc == 1:
		r, ok := escaped[c]
		f.esc = 0
		return ok && step(r)
	case c == '"':
		if !d.ends(f.n, f.hi) {
			return false
		}
		m.pop()
		return true
	case c == '\\':
		for _, r := range escaped {
			if d.step(f.n, f.hi, r) >= 0 {
				f.esc = 1
				return true
			}
		}
		return false
	case c < 0x20:
		return false
	case c < 0x80:
		return step(rune(c))
	}
	// A character's first byte: the characters it can begin.
	var n int8
	var least rune
	var v uint64
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n, least, v = 1, 0x80, uint64(c&0x1F)
	case c >= 0xE0 && c <= 0xEF:
		n, least, v = 2, 0x800, uint64(c&0x0F)
	case c >= 0xF0 && c <= 0xF4:
		n, least, v = 3, 0x10000, uint64(c&0x07)
	default:
		return false
	}
	lo := rune(v << (6 * uint(n)))
	hi := min(lo|(1<<(6*uint(n))-1), 0x10FFFF)
	if !d.takes(f.n, f.hi, max(lo, least), hi) {
		return false
	}
	f.utf, f.seen, f.lo = n, v, int(least)
	return true
}

// escaped are the characters of JSON's short escapes, by the letter after
// the backslash.
var escaped = map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// intDigits is how many integer digits a bounded number of s may have.
func intDigits(s *Schema) int { return min(maxIntDigits, boundedDigits-s.frac) }

// boundedNumber takes c into a number held to [s.lo, s.hi] (units of
// 10^−s.frac) if it continues one that can still end in that range: no
// exponent, at most s.frac fraction digits, no "-0".
func boundedNumber(f *frame, c byte) bool {
	s := f.s
	g := *f
	switch {
	case c == '-' && f.state == nStart:
		g.state, g.pos = nMinus, 1
	case c >= '0' && c <= '9':
		d := uint64(c - '0')
		switch f.state {
		case nStart, nMinus:
			g.seen, g.lo, g.state = d, 1, nInt
			if d == 0 {
				g.state = nZero
			}
		case nInt:
			if g.lo >= intDigits(s) {
				return false
			}
			g.seen, g.lo = g.seen*10+d, g.lo+1
		case nFrac0, nFrac:
			if g.hi >= s.frac {
				return false
			}
			g.n, g.hi, g.state = g.n*10+int(d), g.hi+1, nFrac
		default:
			return false
		}
	case c == '.' && s.frac > 0 && (f.state == nZero || f.state == nInt):
		g.state = nFrac0
	default:
		return false
	}
	if !reachable(&g) {
		return false
	}
	*f = g
	return true
}

// reachable says some number that starts as f's does lies in its bounds.
func reachable(f *frame) bool {
	s := f.s
	unit := pow10[s.frac]
	// meets says the magnitudes [a, b] give a number in bounds.
	meets := func(a, b int64) bool {
		if f.pos == 1 {
			a = max(a, 1) // no "-0"
			return a <= b && -b <= s.hi && -a >= s.lo
		}
		return a <= s.hi && b >= s.lo
	}
	p := int64(f.seen)
	switch f.state {
	case nStart, nMinus:
		return meets(0, pow10[intDigits(s)]*unit-1)
	case nZero:
		return meets(0, unit-1)
	case nInt:
		for k := 0; f.lo+k <= intDigits(s); k++ {
			if meets(p*pow10[k]*unit, (p+1)*pow10[k]*unit-1) {
				return true
			}
		}
		return false
	case nFrac0:
		return meets(p*unit, p*unit+unit-1)
	case nFrac:
		step := pow10[s.frac-f.hi]
		a := p*unit + int64(f.n)*step
		return meets(a, a+step-1)
	}
	return false
}

// inBounds says a bounded number can end here: whole, and in its bounds.
func inBounds(f *frame) bool {
	if f.state != nZero && f.state != nInt && f.state != nFrac {
		return false
	}
	s := f.s
	v := int64(f.seen)*pow10[s.frac] + int64(f.n)*pow10[s.frac-f.hi]
	if f.pos == 1 {
		v = -v
		if v == 0 {
			return false
		}
	}
	return s.lo <= v && v <= s.hi
}
