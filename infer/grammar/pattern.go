package grammar

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A dfa recognizes a string's characters: pattern and format, with the
// length bounds folded in. Its states all lead to an accepting one, so a
// string the machine is inside can always be finished; state 0 starts.
type dfa struct {
	states []dstate
}

type dstate struct {
	accept bool
	tr     []trans // by lo, disjoint
}

type trans struct {
	lo, hi rune
	to     int32
}

// next is the state after r, or −1.
func (d *dfa) next(q int, r rune) int {
	tr := d.states[q].tr
	i, _ := slices.BinarySearchFunc(tr, r, func(t trans, r rune) int {
		switch {
		case t.hi < r:
			return -1
		case t.lo > r:
			return 1
		}
		return 0
	})
	if i < len(tr) && tr[i].lo <= r && r <= tr[i].hi {
		return int(tr[i].to)
	}
	return -1
}

// takes says some character in [lo, hi] leads on from q.
func (d *dfa) takes(q int, lo, hi rune) bool {
	tr := d.states[q].tr
	i := sort.Search(len(tr), func(i int) bool { return tr[i].hi >= lo })
	return i < len(tr) && tr[i].lo <= hi
}

// maxPatternStates bounds the automaton states of a schema's patterns and
// formats, all together (with the length bounds folded in).
const maxPatternStates = 20000

// formats are the string formats enforced, as patterns; they are
// permissive where the standard is intricate (email). Other formats are
// annotations.
var formats = map[string]string{
	"date":      `^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$`,
	"time":      `^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$`,
	"date-time": `^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	"email":     `^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}$`,
}

// stringPattern reads pattern and format into s.pat.
func (c *compiler) stringPattern(s *Schema, obj map[string]any, at string) error {
	var pats []string
	var names []string
	if p, ok := obj["pattern"]; ok {
		ps, ok := p.(string)
		if !ok {
			return fmt.Errorf("%w: %s/pattern must be a string", ErrBadSchema, at)
		}
		pats, names = append(pats, ps), append(names, "pattern")
	}
	if f, ok := obj["format"].(string); ok && formats[f] != "" {
		pats, names = append(pats, formats[f]), append(names, "format "+f)
	}
	if len(pats) == 0 {
		return nil
	}
	if len(pats) > 1 {
		return fmt.Errorf("%w: %s: pattern beside format %v", ErrUnsupported, at, obj["format"])
	}
	d, err := compilePattern(pats[0], s.minLen, s.maxLen, maxPatternStates-c.states)
	if err != nil {
		return fmt.Errorf("%w: %s/%s: %w", ErrUnsupported, at, names[0], err)
	}
	c.states += len(d.states)
	s.pat = d
	return nil
}

// alphabet are the characters a JSON string can hold as the machine
// writes them: any but the control characters without a short escape and
// the surrogates.
var alphabet = []trans{{'\b', '\t', 0}, {'\n', '\n', 0}, {'\f', '\r', 0}, {0x20, 0xD7FF, 0}, {0xE000, utf8.MaxRune, 0}}

// compilePattern builds the automaton of a regular expression (Go's
// syntax; unanchored like JSON Schema's, so "a" means ".*a.*") for strings
// of minLen to maxLen characters (maxLen −1: no limit), of at most limit
// states.
func compilePattern(pat string, minLen, maxLen, limit int) (*dfa, error) {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", pat, err)
	}
	re = re.Simplify()
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	begin := len(subs) > 0 && (subs[0].Op == syntax.OpBeginText || subs[0].Op == syntax.OpBeginLine)
	if begin {
		subs = subs[1:]
	}
	end := len(subs) > 0 && (subs[len(subs)-1].Op == syntax.OpEndText || subs[len(subs)-1].Op == syntax.OpEndLine)
	if end {
		subs = subs[:len(subs)-1]
	}
	anyText := &syntax.Regexp{Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
	var parts []*syntax.Regexp
	if !begin {
		parts = append(parts, anyText)
	}
	parts = append(parts, subs...)
	if !end {
		parts = append(parts, anyText)
	}
	whole := &syntax.Regexp{Op: syntax.OpConcat, Sub: parts}
	if len(parts) == 0 {
		whole = &syntax.Regexp{Op: syntax.OpEmptyMatch}
	}
	prog, err := syntax.Compile(whole)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", pat, err)
	}
	for _, in := range prog.Inst {
		switch in.Op {
		case syntax.InstEmptyWidth:
			return nil, fmt.Errorf("%q: anchors or word boundaries inside the expression", pat)
		case syntax.InstRune:
			if syntax.Flags(in.Arg)&syntax.FoldCase != 0 && len(in.Rune) != 1 {
				return nil, fmt.Errorf("%q: case folding (?i) of a class", pat)
			}
		}
	}
	return subsetDFA(prog, minLen, maxLen, limit)
}

// subsetDFA is the deterministic automaton of prog's NFA, its states the
// sets of instructions the NFA can be at, paired with the characters read
// so far (capped at what the length bounds tell apart).
func subsetDFA(prog *syntax.Prog, minLen, maxLen, limit int) (*dfa, error) {
	capLen := minLen
	if maxLen >= 0 {
		capLen = maxLen
	}
	type key struct {
		set string
		n   int
	}
	closure := func(pcs []uint32) []uint32 {
		var out []uint32
		seen := map[uint32]bool{}
		var add func(pc uint32)
		add = func(pc uint32) {
			if seen[pc] {
				return
			}
			seen[pc] = true
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				add(in.Out)
				add(in.Arg)
			case syntax.InstCapture, syntax.InstNop:
				add(in.Out)
			default:
				out = append(out, pc)
			}
		}
		for _, pc := range pcs {
			add(pc)
		}
		slices.Sort(out)
		return out
	}
	setKey := func(set []uint32) string {
		var b strings.Builder
		for _, pc := range set {
			b.WriteString(strconv.FormatUint(uint64(pc), 36))
			b.WriteByte(',')
		}
		return b.String()
	}
	d := &dfa{}
	index := map[key]int{}
	var sets [][]uint32
	var lens []int
	add := func(set []uint32, n int) (int, error) {
		k := key{setKey(set), n}
		if i, ok := index[k]; ok {
			return i, nil
		}
		if len(d.states) >= limit {
			return 0, fmt.Errorf("the expression needs more than %d states", limit)
		}
		i := len(d.states)
		index[k] = i
		accept := n >= minLen && slices.ContainsFunc(set, func(pc uint32) bool { return prog.Inst[pc].Op == syntax.InstMatch })
		d.states = append(d.states, dstate{accept: accept})
		sets, lens = append(sets, set), append(lens, n)
		return i, nil
	}
	if _, err := add(closure([]uint32{uint32(prog.Start)}), 0); err != nil {
		return nil, err
	}
	for q := 0; q < len(d.states); q++ {
		set, n := sets[q], lens[q]
		if maxLen >= 0 && n >= maxLen {
			continue // no room for another character
		}
		// The boundaries of the characters the set's instructions take,
		// within the alphabet.
		var cuts []rune
		var runes []*syntax.Inst
		for _, pc := range set {
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstRune:
				if len(in.Rune) == 1 { // a letter of either case
					for r := in.Rune[0]; ; {
						cuts = append(cuts, r, r+1)
						if r = unicode.SimpleFold(r); r == in.Rune[0] {
							break
						}
					}
				}
				for i := 0; i+1 < len(in.Rune); i += 2 {
					cuts = append(cuts, in.Rune[i], in.Rune[i+1]+1)
				}
			case syntax.InstRune1:
				cuts = append(cuts, in.Rune[0], in.Rune[0]+1)
			case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				cuts = append(cuts, 0, '\n', '\n'+1, utf8.MaxRune+1)
			default:
				continue
			}
			runes = append(runes, in)
		}
		for _, a := range alphabet {
			cuts = append(cuts, a.lo, a.hi+1)
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		var tr []trans
		for i := 0; i+1 < len(cuts); i++ {
			lo, hi := cuts[i], cuts[i+1]-1
			if !slices.ContainsFunc(alphabet, func(a trans) bool { return a.lo <= lo && hi <= a.hi }) {
				continue
			}
			var next []uint32
			for _, in := range runes {
				if in.MatchRune(lo) {
					next = append(next, in.Out)
				}
			}
			if len(next) == 0 {
				continue
			}
			to, err := add(closure(next), min(n+1, capLen))
			if err != nil {
				return nil, err
			}
			if k := len(tr) - 1; k >= 0 && tr[k].to == int32(to) && tr[k].hi+1 == lo {
				tr[k].hi = hi
				continue
			}
			tr = append(tr, trans{lo, hi, int32(to)})
		}
		d.states[q].tr = tr
	}
	return d.prune()
}

// prune drops the states from which no accepting state can be reached, so
// that the machine never enters a string it cannot finish.
func (d *dfa) prune() (*dfa, error) {
	from := make([][]int32, len(d.states)) // the states with a transition to each
	var todo []int
	live := make([]bool, len(d.states))
	for q, st := range d.states {
		for _, t := range st.tr {
			from[t.to] = append(from[t.to], int32(q))
		}
		if st.accept {
			live[q] = true
			todo = append(todo, q)
		}
	}
	for len(todo) > 0 {
		q := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, p := range from[q] {
			if !live[p] {
				live[p] = true
				todo = append(todo, int(p))
			}
		}
	}
	if !live[0] {
		return nil, fmt.Errorf("no string matches it (within the length bounds)")
	}
	for q := range d.states {
		d.states[q].tr = slices.DeleteFunc(d.states[q].tr, func(t trans) bool { return !live[t.to] })
	}
	return d, nil
}
