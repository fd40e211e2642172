package grammar

import "sort"

// Machine recognizes, byte by byte, the JSON texts a Schema allows: a
// pushdown automaton whose stack holds one frame per open value. A frame
// that could end or go on (a number, an enum value that is a prefix of
// another) ends when a byte it cannot take comes, which is then fed to the
// frame below. The zero Machine accepts nothing.
type Machine struct{ st []frame }

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

	nStart = iota - 7
	nMinus
	nZero
	nInt
	nFrac0
	nFrac
	nExp0
	nExpSign
	nExp
)

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
	lits  []string
	lo    int // literal: lits[lo:hi] match the bytes so far
	hi    int
	pos   int
}

// NewMachine recognizes a value of s.
// The text starts with the value itself, no whitespace.
func NewMachine(s *Schema) *Machine {
	return &Machine{st: []frame{{kind: kValue, s: s, ws: wsDone}}}
}

// NewWrapped recognizes prefix, a value of s, then suffix: a tool call
// "<tool_call>\n{…}\n</tool_call>" for instance.
func NewWrapped(prefix string, s *Schema, suffix string) *Machine {
	var st []frame
	if suffix != "" {
		st = append(st, literal([]string{suffix}))
	}
	st = append(st, frame{kind: kValue, s: s, ws: wsDone})
	if prefix != "" {
		st = append(st, literal([]string{prefix}))
	}
	return &Machine{st: st}
}

func literal(lits []string) frame { return frame{kind: kLiteral, lits: lits, hi: len(lits)} }

// CopyFrom makes m the same state as o, reusing m's storage.
func (m *Machine) CopyFrom(o *Machine) { m.st = append(m.st[:0], o.st...) }

// CanEnd says the bytes so far are a whole text.
func (m *Machine) CanEnd() bool {
	switch len(m.st) {
	case 0:
		return true
	case 1:
		return completable(&m.st[0])
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

func completable(f *frame) bool {
	switch f.kind {
	case kNumber:
		return f.state == nZero || f.state == nInt || f.state == nFrac || f.state == nExp
	case kLiteral:
		return f.lo < f.hi && f.pos == len(f.lits[f.lo])
	}
	return false
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func (m *Machine) pop() {
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

func (m *Machine) push(f frame) { m.st = append(m.st, f) }

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

func (m *Machine) feed(c byte) bool {
	for len(m.st) > 0 {
		f := &m.st[len(m.st)-1]
		switch f.kind {
		case kValue:
			if isWS(c) {
				return space(f, c)
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
func (m *Machine) start(f *frame, c byte) bool {
	s := f.s
	if s.enum != nil {
		*f = literal(s.enum)
		return true
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

func (m *Machine) object(f *frame, c byte) bool {
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

func (m *Machine) array(f *frame, c byte) bool {
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
		f.n++
		m.push(frame{kind: kValue, s: s.items})
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

func (m *Machine) str(f *frame, c byte) bool {
	if f.ws < 0 { // the opening quote
		f.ws = 0
		return true
	}
	s := f.s
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
	if len(m.st) == 0 {
		return 0, false
	}
	f := &m.st[len(m.st)-1]
	if f.kind != kString || f.ws < 0 || f.esc != 0 || f.utf != 0 {
		return 0, false
	}
	if f.s.maxLen < 0 {
		return -1, true
	}
	return f.s.maxLen - f.n, true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// number takes c into a number if it continues one (JSON's grammar; no
// fraction or exponent for an integer).
func number(f *frame, c byte) bool {
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
