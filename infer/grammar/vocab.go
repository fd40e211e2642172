package grammar

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// Vocab is a tokenizer's vocabulary arranged for masking: the tokens'
// bytes sorted, so that tokens sharing a prefix are fed that prefix once.
// It is built once per tokenizer and shared by every Constraint.
type Vocab struct {
	pieces []string // by id; "" for tokens never allowed inside a text
	sorted []int32  // ids of non-empty pieces, by piece
	lcp    []int    // lcp[i]: bytes sorted[i] shares with sorted[i−1]
	ends   map[int32]bool
	depth  int // the longest piece
	// plain[id] says the piece is whole UTF-8 characters that a JSON
	// string takes as they are (no quote, backslash or control byte);
	// runes[id] counts them. Inside a string such a token is allowed
	// without running the machine.
	plain []bool
	runes []int
	// marks are the control tokens' texts ([TOOL_CALLS], <|python_tag|>):
	// allowed only where the machine is in the markup around the value,
	// as the family's own token for that markup.
	marks map[int32]string
}

// NewVocab arranges n tokens: piece(id) is a token's bytes, control(id)
// says it is a control token (never part of the JSON; allowed in the
// markup around it that its text spells, as Mistral's [TOOL_CALLS] before
// the calls), ends are the tokens that end a reply (allowed once the text
// is whole).
func NewVocab(n int, piece func(id int32) string, control func(id int32) bool, ends []int32) *Vocab {
	v := &Vocab{pieces: make([]string, n), ends: map[int32]bool{}, plain: make([]bool, n), runes: make([]int, n), marks: map[int32]string{}}
	for _, id := range ends {
		v.ends[id] = true
	}
	for id := range int32(n) {
		if v.ends[id] {
			continue
		}
		if control(id) {
			if p := piece(id); p != "" {
				v.marks[id] = p
			}
			continue
		}
		if p := piece(id); p != "" {
			v.pieces[id] = p
			v.plain[id] = utf8.ValidString(p) && !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' })
			v.runes[id] = utf8.RuneCountInString(p)
			v.sorted = append(v.sorted, id)
			v.depth = max(v.depth, len(p))
		}
	}
	sort.Slice(v.sorted, func(i, j int) bool { return v.pieces[v.sorted[i]] < v.pieces[v.sorted[j]] })
	v.lcp = make([]int, len(v.sorted))
	for i := 1; i < len(v.sorted); i++ {
		a, b := v.pieces[v.sorted[i-1]], v.pieces[v.sorted[i]]
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		v.lcp[i] = k
	}
	return v
}

// Constraint masks a vocabulary to what a Machine accepts next. It
// implements slots.Constraint.
type Constraint struct {
	v      *Vocab
	m      Machine
	try    Machine
	states []Machine // Mask's: the machine after each prefix of the piece in hand
	qs     []int32   // Mask's in a pattern's string: the automaton's states after each prefix
}

// NewConstraint starts a constraint at m's state.
func NewConstraint(v *Vocab, m *Machine) *Constraint {
	c := &Constraint{v: v, states: make([]Machine, v.depth+1)}
	c.m.CopyFrom(m)
	return c
}

// Allowed says id may come next: an end token once the text is whole,
// else a token whose bytes the machine takes.
func (c *Constraint) Allowed(id int32) bool {
	if c.v.ends[id] {
		return c.m.CanEnd()
	}
	if p, ok := c.v.marks[id]; ok {
		c.try.CopyFrom(&c.m)
		return c.m.atMarkup() && c.try.Feed(p)
	}
	if id < 0 || int(id) >= len(c.v.pieces) || c.v.pieces[id] == "" {
		return false
	}
	c.try.CopyFrom(&c.m)
	return c.try.Feed(c.v.pieces[id])
}

// Accept advances past id.
func (c *Constraint) Accept(id int32) error {
	if c.v.ends[id] {
		if !c.m.CanEnd() {
			return fmt.Errorf("grammar: the reply ended inside its JSON")
		}
		return nil
	}
	if !c.Allowed(id) {
		return fmt.Errorf("grammar: token %d (%q) does not continue the JSON", id, c.v.piece(id))
	}
	c.m, c.try = c.try, c.m
	return nil
}

// CanEnd says the text so far is whole.
func (c *Constraint) CanEnd() bool { return c.m.CanEnd() }

// Mask sets the logits of the tokens not allowed next to −∞. It walks the
// sorted pieces, feeding each only the bytes after the prefix it shares
// with the one before, and skipping every piece that starts with a prefix
// already refused.
func (c *Constraint) Mask(logits []float32) {
	allowed := make([]bool, len(c.v.pieces))
	if room, ok := c.m.plainString(); ok {
		// Inside a string most tokens are plain text: those need no
		// machine, the few others are tried one by one.
		for _, id := range c.v.sorted {
			if c.v.plain[id] {
				allowed[id] = room < 0 || c.v.runes[id] <= room
			} else {
				c.try.CopyFrom(&c.m)
				allowed[id] = c.try.Feed(c.v.pieces[id])
			}
		}
		c.apply(logits, allowed)
		return
	}
	if q, n, d, ok := c.m.patString(); ok {
		c.maskPattern(d, q, n, allowed)
		c.apply(logits, allowed)
		return
	}
	st := c.states
	st[0].CopyFrom(&c.m)
	valid, dead := 0, -1 // st[0..valid] hold the previous piece's prefixes; dead: a refused prefix's length
	for i, id := range c.v.sorted {
		p, l := c.v.pieces[id], c.v.lcp[i]
		if dead >= 0 && l >= dead {
			continue
		}
		dead = -1
		d := min(l, valid)
		ok := true
		for ; d < len(p); d++ {
			st[d+1].CopyFrom(&st[d])
			if !st[d+1].feed(p[d]) {
				dead, ok = d+1, false
				break
			}
		}
		valid = d
		allowed[id] = ok
	}
	if c.m.atMarkup() {
		for id, p := range c.v.marks {
			c.try.CopyFrom(&c.m)
			allowed[id] = c.try.Feed(p)
		}
	}
	c.apply(logits, allowed)
}

// piece is a token's text, a control token's included.
func (v *Vocab) piece(id int32) string {
	if p, ok := v.marks[id]; ok {
		return p
	}
	if id < 0 || int(id) >= len(v.pieces) {
		return ""
	}
	return v.pieces[id]
}

// maskPattern decides the tokens allowed inside a string an automaton
// recognizes, from its state q: a plain token by running the automaton
// over its characters, sharing the states of the prefix it has in common
// with the token before (the machine's copies made this walk 30 times
// slower); the few others through the machine.
func (c *Constraint) maskPattern(d *dfa, q, n0 int, allowed []bool) {
	qs := append(c.qs[:0], int32(q))
	// qs[0..valid]: the states after the prefixes of the last plain piece
	// walked (−2 inside a character), shared with the piece in hand up to
	// run bytes; dead: a refused prefix's length, shared up to deadRun.
	// (In sorted order a piece shares with an earlier one the least of
	// the common prefixes of the pieces between.)
	valid, run := 0, 0
	dead, deadRun := -1, 0
	for i, id := range c.v.sorted {
		p, l := c.v.pieces[id], c.v.lcp[i]
		run, deadRun = min(run, l), min(deadRun, l)
		if dead >= 0 && deadRun >= dead {
			continue
		}
		dead = -1
		if !c.v.plain[id] {
			c.try.CopyFrom(&c.m)
			ok := true
			for j := 0; j < len(p); j++ {
				if !c.try.feed(p[j]) {
					dead, deadRun, ok = j+1, len(p), false
					break
				}
			}
			allowed[id] = ok
			continue
		}
		k := min(run, valid)
		for k > 0 && qs[k] == -2 { // back to a character's start
			k--
		}
		qs = qs[:k+1]
		st := int(qs[k])
		n := n0 + utf8.RuneCountInString(p[:k])
		ok := true
		for k < len(p) {
			r, size := utf8.DecodeRuneInString(p[k:])
			if st = d.step(st, n, r); st < 0 {
				dead, deadRun, ok = k+size, len(p), false
				break
			}
			for range size - 1 {
				qs = append(qs, -2)
			}
			qs = append(qs, int32(st))
			k += size
			n++
		}
		valid, run = len(qs)-1, len(p)
		allowed[id] = ok
	}
	c.qs = qs
}

// apply sets the logits of the tokens not allowed to −∞ (end tokens are
// allowed once the text is whole).
func (c *Constraint) apply(logits []float32, allowed []bool) {
	ninf := float32(math.Inf(-1))
	end := c.m.CanEnd()
	for id := range logits {
		if id < len(allowed) && (allowed[id] || end && c.v.ends[int32(id)]) {
			continue
		}
		logits[id] = ninf
	}
}
