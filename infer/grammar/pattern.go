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
	// The length bounds, in characters (maxLen −1: none): with maxLen,
	// reach[q] has bit L set when an accepting state is L characters from
	// q (L ≤ maxLen); with minLen only, longest[q] is the longest way to
	// an accepting state, capped at minLen.
	minLen, maxLen int
	reach          [][]uint64
	longest        []int32
}

// maxLengthWork bounds the work of folding the length bounds in: states
// × transitions × words of the length sets × rounds.
const maxLengthWork = 50_000_000

// lengths computes what fits needs for the bounds.
func (d *dfa) lengths(minLen, maxLen int) error {
	d.minLen, d.maxLen = minLen, maxLen
	trans := 0
	for _, st := range d.states {
		trans += len(st.tr) + 1
	}
	switch {
	case maxLen >= 0:
		words := maxLen/64 + 1
		if trans*words*(maxLen+1) > maxLengthWork {
			return fmt.Errorf("the expression with maxLength %d is too large to enforce", maxLen)
		}
		reach := make([][]uint64, len(d.states))
		for q, st := range d.states {
			reach[q] = make([]uint64, words)
			if st.accept {
				reach[q][0] = 1
			}
		}
		// Round k adds the ways of k characters.
		next := make([]uint64, words)
		for range maxLen {
			changed := false
			for q, st := range d.states {
				clear(next)
				for _, t := range st.tr {
					shiftOr(next, reach[t.to])
				}
				for w := range next {
					if v := reach[q][w] | next[w]; v != reach[q][w] {
						reach[q][w], changed = v, true
					}
				}
			}
			if !changed {
				break
			}
		}
		// Lengths past maxLen are not wanted.
		for q := range reach {
			if r := (maxLen + 1) % 64; r != 0 {
				reach[q][words-1] &= 1<<r - 1
			}
		}
		d.reach = reach
	case minLen > 0:
		if trans*(minLen+1) > maxLengthWork {
			return fmt.Errorf("the expression with minLength %d is too large to enforce", minLen)
		}
		longest := make([]int32, len(d.states))
		for q, st := range d.states {
			longest[q] = -1
			if st.accept {
				longest[q] = 0
			}
		}
		for changed, work := true, 0; changed; work += trans {
			if work > maxLengthWork {
				return fmt.Errorf("the expression with minLength %d is too large to enforce", minLen)
			}
			changed = false
			for q, st := range d.states {
				for _, t := range st.tr {
					if l := min(longest[t.to]+1, int32(minLen)); longest[t.to] >= 0 && l > longest[q] {
						longest[q], changed = l, true
					}
				}
			}
		}
		d.longest = longest
	}
	if !d.fits(0, 0) {
		return fmt.Errorf("no string of its length bounds matches it")
	}
	return nil
}

// shiftOr sets in dst the lengths of src, one longer.
func shiftOr(dst, src []uint64) {
	carry := uint64(0)
	for w := range src {
		dst[w] |= src[w]<<1 | carry
		carry = src[w] >> 63
	}
}

// fits says a string of n characters so far, at state q, can still end
// within the length bounds.
func (d *dfa) fits(q, n int) bool {
	switch {
	case d.reach != nil:
		lo, hi := max(d.minLen-n, 0), d.maxLen-n
		if hi < lo {
			return false
		}
		r := d.reach[q]
		for l := lo; l <= hi; {
			w := r[l/64] >> (l % 64)
			if l%64 == 0 && r[l/64] == 0 {
				l += 64
				continue
			}
			if w&1 != 0 {
				return true
			}
			l++
		}
		return false
	case d.longest != nil:
		return int(d.longest[q]) >= d.minLen-n
	}
	return true
}

// step is the state after r from q, with n characters before it, or −1.
func (d *dfa) step(q, n int, r rune) int {
	if q = d.next(q, r); q >= 0 && d.fits(q, n+1) {
		return q
	}
	return -1
}

// ends says a string of n characters may end at q.
func (d *dfa) ends(q, n int) bool {
	return d.states[q].accept && n >= d.minLen && (d.maxLen < 0 || n <= d.maxLen)
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

// takes says some character in [lo, hi] leads on from q, with n
// characters before it.
func (d *dfa) takes(q, n int, lo, hi rune) bool {
	tr := d.states[q].tr
	for i := sort.Search(len(tr), func(i int) bool { return tr[i].hi >= lo }); i < len(tr) && tr[i].lo <= hi; i++ {
		if d.fits(int(tr[i].to), n+1) {
			return true
		}
	}
	return false
}

// maxPatternStates bounds the automaton states of a schema's patterns and
// formats, all together (with the length bounds folded in).
const maxPatternStates = 20000

// maxPatternInsts bounds a pattern's compiled size: each automaton state
// costs a pass over its instructions.
const maxPatternInsts = 2000

// maxPatternWork bounds the instructions visited building one pattern's
// automaton: about 50 ms of a core.
const maxPatternWork = 1_000_000

// formats are the string formats enforced, as patterns; they are
// permissive where the standard is intricate (email). Other formats are
// annotations.
var formats = map[string]string{
	"date":      `^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$`,
	"time":      `^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$`,
	"date-time": `^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	// No dot first, last or twice in the local part, labels that start
	// and end with a letter or digit, a top-level domain of letters: what
	// the strict validators (zod's, email-validator) take too.
	"email": `^[A-Za-z0-9_+-]{1,32}(?:\.[A-Za-z0-9_+-]{1,32}){0,3}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?\.){1,4}[A-Za-z]{2,12}$`,
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
	var d *dfa
	for i, p := range pats {
		pd, err := compilePattern(p, maxPatternStates-c.states)
		if err != nil {
			return fmt.Errorf("%w: %s/%s: %w", ErrUnsupported, at, names[i], err)
		}
		if d == nil {
			d = pd
		} else if d, err = intersect(d, pd, maxPatternStates-c.states); err != nil {
			return fmt.Errorf("%w: %s: pattern and %s together: %w", ErrUnsupported, at, names[i], err)
		}
	}
	if err := d.lengths(s.minLen, s.maxLen); err != nil {
		return fmt.Errorf("%w: %s/%s: %w", ErrUnsupported, at, strings.Join(names, " and "), err)
	}
	c.states += len(d.states)
	s.pat = d
	return nil
}

// intersect is the automaton of the strings both a and b recognize.
func intersect(a, b *dfa, limit int) (*dfa, error) {
	d := &dfa{}
	index := map[[2]int32]int32{}
	var pairs [][2]int32
	add := func(p [2]int32) (int32, error) {
		if i, ok := index[p]; ok {
			return i, nil
		}
		if len(d.states) >= limit {
			return 0, fmt.Errorf("more than %d states", limit)
		}
		i := int32(len(d.states))
		index[p] = i
		pairs = append(pairs, p)
		d.states = append(d.states, dstate{accept: a.states[p[0]].accept && b.states[p[1]].accept})
		return i, nil
	}
	if _, err := add([2]int32{0, 0}); err != nil {
		return nil, err
	}
	for q := 0; q < len(d.states); q++ {
		ta, tb := a.states[pairs[q][0]].tr, b.states[pairs[q][1]].tr
		var tr []trans
		for i, j := 0, 0; i < len(ta) && j < len(tb); {
			lo, hi := max(ta[i].lo, tb[j].lo), min(ta[i].hi, tb[j].hi)
			if lo <= hi {
				to, err := add([2]int32{ta[i].to, tb[j].to})
				if err != nil {
					return nil, err
				}
				tr = append(tr, trans{lo, hi, to})
			}
			if ta[i].hi < tb[j].hi {
				i++
			} else {
				j++
			}
		}
		d.states[q].tr = tr
	}
	return d.prune()
}

// alphabet are the characters a JSON string can hold as the machine
// writes them: any but the control characters without a short escape and
// the surrogates.
var alphabet = []trans{{'\b', '\t', 0}, {'\n', '\n', 0}, {'\f', '\r', 0}, {0x20, 0xD7FF, 0}, {0xE000, utf8.MaxRune, 0}}

// compilePattern builds the automaton of a regular expression (Go's
// syntax; unanchored like JSON Schema's, so "a" means ".*a.*"), of at most
// limit states.
func compilePattern(pat string, limit int) (*dfa, error) {
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
	if len(prog.Inst) > maxPatternInsts {
		return nil, fmt.Errorf("%q: an expression of %d instructions, at most %d", pat, len(prog.Inst), maxPatternInsts)
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
	return subsetDFA(prog, limit)
}

// subsetDFA is the deterministic automaton of prog's NFA, its states the
// sets of instructions the NFA can be at.
func subsetDFA(prog *syntax.Prog, limit int) (*dfa, error) {
	minLen := 0
	type key struct {
		set string
		n   int
	}
	work := 0 // instructions visited, all states together
	closure := func(pcs []uint32) []uint32 {
		var out []uint32
		seen := map[uint32]bool{}
		var add func(pc uint32)
		add = func(pc uint32) {
			if seen[pc] {
				return
			}
			seen[pc] = true
			work++
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
		if work > maxPatternWork {
			return 0, fmt.Errorf("the expression takes more than %d steps to compile", maxPatternWork)
		}
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
			to, err := add(closure(next), n)
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
