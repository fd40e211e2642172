package jinja

import (
	"fmt"
	"slices"
)

// Statements.
type node interface{}

type (
	textNode   struct{ text string }
	outputNode struct {
		pos Pos
		e   expr
	}
	ifNode struct {
		pos    Pos
		conds  []expr
		bodies [][]node // len(conds) or len(conds)+1 with an else
	}
	forNode struct {
		pos       Pos
		targets   []string
		iter      expr
		filter    expr
		body      []node
		elseBody  []node
		recursive bool
	}
	setNode struct {
		pos     Pos
		targets []string // names, or one name for an attribute target
		attr    string   // ns.attr = ...
		value   expr
		body    []node // {% set x %}...{% endset %}
	}
	macroNode struct {
		pos    Pos
		name   string
		params []param
		body   []node
	}
	callBlockNode struct {
		pos    Pos
		params []param
		call   *callExpr
		body   []node
	}
	filterBlockNode struct {
		pos    Pos
		filter *filterExpr // arg is nil: the body
		body   []node
	}
	breakNode    struct{ pos Pos }
	continueNode struct{ pos Pos }
)

type param struct {
	name string
	def  expr // nil: required
}

// Expressions.
type expr interface{ position() Pos }

type (
	literal struct {
		pos Pos
		v   Value
	}
	nameExpr struct {
		pos  Pos
		name string
	}
	listExpr struct {
		pos   Pos
		items []expr
		tuple bool
	}
	dictExpr struct {
		pos        Pos
		keys, vals []expr
	}
	attrExpr struct {
		pos  Pos
		obj  expr
		name string
	}
	indexExpr struct {
		pos          Pos
		obj          expr
		index        expr
		lo, hi, step expr // a slice when isSlice
		isSlice      bool
	}
	callExpr struct {
		pos    Pos
		fn     expr
		args   []expr
		kwKeys []string
		kwVals []expr
	}
	filterExpr struct {
		pos  Pos
		arg  expr
		name string
		call *callExpr // args only (fn nil)
	}
	testExpr struct {
		pos  Pos
		arg  expr
		name string
		neg  bool
		args []expr
	}
	unaryExpr struct {
		pos Pos
		op  string
		x   expr
	}
	binaryExpr struct {
		pos  Pos
		op   string
		l, r expr
	}
	condExpr struct {
		pos           Pos
		cond, yes, no expr
	}
)

func (e *literal) position() Pos    { return e.pos }
func (e *nameExpr) position() Pos   { return e.pos }
func (e *listExpr) position() Pos   { return e.pos }
func (e *dictExpr) position() Pos   { return e.pos }
func (e *attrExpr) position() Pos   { return e.pos }
func (e *indexExpr) position() Pos  { return e.pos }
func (e *callExpr) position() Pos   { return e.pos }
func (e *filterExpr) position() Pos { return e.pos }
func (e *testExpr) position() Pos   { return e.pos }
func (e *unaryExpr) position() Pos  { return e.pos }
func (e *binaryExpr) position() Pos { return e.pos }
func (e *condExpr) position() Pos   { return e.pos }

// maxNesting bounds the parser's recursion (nested blocks and
// expressions), so a hostile template cannot exhaust the stack.
const maxNesting = 200

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errf(pos Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Err: ErrSyntax}
}

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.peek()
	return t.kind == tName && t.val == name
}

func (p *parser) expectOp(op string) error {
	t := p.next()
	if t.kind != tOp || t.val != op {
		return p.errf(t.pos, "expected %q, found %s", op, describe(t))
	}
	return nil
}

func (p *parser) expectName() (string, Pos, error) {
	t := p.next()
	if t.kind != tName {
		return "", t.pos, p.errf(t.pos, "expected a name, found %s", describe(t))
	}
	return t.val, t.pos, nil
}

func (p *parser) expectKind(k tokKind, what string) error {
	t := p.next()
	if t.kind != k {
		return p.errf(t.pos, "expected %s, found %s", what, describe(t))
	}
	return nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "the end of the template"
	case tText:
		return "text"
	case tVarOpen:
		return "'{{'"
	case tVarClose:
		return "'}}'"
	case tBlockOpen:
		return "'{%'"
	case tBlockClose:
		return "'%}'"
	case tName:
		return fmt.Sprintf("%q", t.val)
	case tString:
		return "a string"
	case tInt, tFloat:
		return "a number"
	}
	return fmt.Sprintf("%q", t.val)
}

func (p *parser) enter(pos Pos) error {
	p.depth++
	if p.depth > maxNesting {
		return &Error{Pos: pos, Msg: "template nested too deeply", Err: ErrLimit}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// body parses statements until a block tag whose keyword is in ends (or
// the end of the template when ends is empty); it returns that keyword,
// leaving the parser after it.
func (p *parser) body(ends ...string) ([]node, string, error) {
	var out []node
	for {
		t := p.peek()
		switch t.kind {
		case tEOF:
			if len(ends) > 0 {
				return nil, "", p.errf(t.pos, "missing {%% %s %%}", ends[len(ends)-1])
			}
			return out, "", nil
		case tText:
			p.next()
			out = append(out, &textNode{text: t.val})
		case tVarOpen:
			p.next()
			e, err := p.expr()
			if err != nil {
				return nil, "", err
			}
			if err := p.expectKind(tVarClose, "'}}'"); err != nil {
				return nil, "", err
			}
			out = append(out, &outputNode{pos: t.pos, e: e})
		case tBlockOpen:
			p.next()
			kw := p.peek()
			if kw.kind != tName {
				return nil, "", p.errf(kw.pos, "expected a statement, found %s", describe(kw))
			}
			if slices.Contains(ends, kw.val) {
				p.next()
				return out, kw.val, nil
			}
			n, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				out = append(out, n)
			}
		default:
			return nil, "", p.errf(t.pos, "unexpected %s", describe(t))
		}
	}
}

func (p *parser) endTag() error { return p.expectKind(tBlockClose, "'%}'") }

func (p *parser) statement() (node, error) {
	kw := p.next()
	if err := p.enter(kw.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch kw.val {
	case "if":
		return p.ifStmt(kw.pos)
	case "for":
		return p.forStmt(kw.pos)
	case "set":
		return p.setStmt(kw.pos)
	case "macro":
		return p.macroStmt(kw.pos)
	case "call":
		return p.callStmt(kw.pos)
	case "filter":
		return p.filterStmt(kw.pos)
	case "break":
		return &breakNode{kw.pos}, p.endTag()
	case "continue":
		return &continueNode{kw.pos}, p.endTag()
	case "generation":
		// Hugging Face's marker for assistant tokens: render the body.
		if err := p.endTag(); err != nil {
			return nil, err
		}
		body, _, err := p.body("endgeneration")
		if err != nil {
			return nil, err
		}
		return &ifNode{pos: kw.pos, conds: []expr{&literal{v: true}}, bodies: [][]node{body}}, p.endTag()
	case "do":
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		return &setNode{pos: kw.pos, value: e}, p.endTag()
	}
	return nil, p.errf(kw.pos, "unknown statement %q", kw.val)
}

func (p *parser) ifStmt(pos Pos) (node, error) {
	n := &ifNode{pos: pos}
	for {
		cond, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.endTag(); err != nil {
			return nil, err
		}
		body, end, err := p.body("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, cond), append(n.bodies, body)
		switch end {
		case "endif":
			return n, p.endTag()
		case "else":
			if err := p.endTag(); err != nil {
				return nil, err
			}
			body, _, err := p.body("endif")
			if err != nil {
				return nil, err
			}
			n.bodies = append(n.bodies, body)
			return n, p.endTag()
		}
	}
}

func (p *parser) forStmt(pos Pos) (node, error) {
	n := &forNode{pos: pos}
	for {
		name, _, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, name)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if !p.isName("in") {
		return nil, p.errf(p.peek().pos, "expected 'in', found %s", describe(p.peek()))
	}
	p.next()
	var err error
	if n.iter, err = p.orExpr(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		if n.filter, err = p.orExpr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		p.next()
		n.recursive = true
	}
	if err := p.endTag(); err != nil {
		return nil, err
	}
	body, end, err := p.body("else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.endTag(); err != nil {
			return nil, err
		}
		if n.elseBody, _, err = p.body("endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.endTag()
}

func (p *parser) setStmt(pos Pos) (node, error) {
	n := &setNode{pos: pos}
	name, _, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n.targets = []string{name}
	if p.isOp(".") {
		p.next()
		if n.attr, _, err = p.expectName(); err != nil {
			return nil, err
		}
	}
	for p.isOp(",") && n.attr == "" {
		p.next()
		name, _, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, name)
	}
	if p.peek().kind == tBlockClose && len(n.targets) == 1 && n.attr == "" {
		p.next()
		if n.body, _, err = p.body("endset"); err != nil {
			return nil, err
		}
		return n, p.endTag()
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	if n.value, err = p.tupleOrExpr(); err != nil {
		return nil, err
	}
	return n, p.endTag()
}

func (p *parser) params() ([]param, error) {
	var ps []param
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		name, _, err := p.expectName()
		if err != nil {
			return nil, err
		}
		pr := param{name: name}
		if p.isOp("=") {
			p.next()
			if pr.def, err = p.expr(); err != nil {
				return nil, err
			}
		}
		ps = append(ps, pr)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return ps, p.expectOp(")")
}

func (p *parser) macroStmt(pos Pos) (node, error) {
	name, _, err := p.expectName()
	if err != nil {
		return nil, err
	}
	ps, err := p.params()
	if err != nil {
		return nil, err
	}
	if err := p.endTag(); err != nil {
		return nil, err
	}
	body, _, err := p.body("endmacro")
	if err != nil {
		return nil, err
	}
	if p.peek().kind == tName { // {% endmacro name %}
		p.next()
	}
	return &macroNode{pos: pos, name: name, params: ps, body: body}, p.endTag()
}

func (p *parser) callStmt(pos Pos) (node, error) {
	n := &callBlockNode{pos: pos}
	var err error
	if p.isOp("(") {
		if n.params, err = p.params(); err != nil {
			return nil, err
		}
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	c, ok := e.(*callExpr)
	if !ok {
		return nil, p.errf(e.position(), "{%% call %%} needs a macro call")
	}
	n.call = c
	if err := p.endTag(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.body("endcall"); err != nil {
		return nil, err
	}
	return n, p.endTag()
}

func (p *parser) filterStmt(pos Pos) (node, error) {
	n := &filterBlockNode{pos: pos}
	f, err := p.filterTail(nil)
	if err != nil {
		return nil, err
	}
	n.filter = f
	if err := p.endTag(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.body("endfilter"); err != nil {
		return nil, err
	}
	return n, p.endTag()
}

// Expressions, lowest precedence first, as Jinja orders them.

// tupleOrExpr allows an unparenthesised tuple (set a = 1, 2).
func (p *parser) tupleOrExpr() (expr, error) {
	pos := p.peek().pos
	e, err := p.expr()
	if err != nil || !p.isOp(",") {
		return e, err
	}
	items := []expr{e}
	for p.isOp(",") {
		p.next()
		if k := p.peek().kind; k == tBlockClose || k == tVarClose {
			break
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &listExpr{pos: pos, items: items, tuple: true}, nil
}

func (p *parser) expr() (expr, error) {
	pos := p.peek().pos
	if err := p.enter(pos); err != nil {
		return nil, err
	}
	defer p.leave()
	e, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.next()
		cond, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		var no expr = &literal{pos: pos, v: Undefined{}}
		if p.isName("else") {
			p.next()
			if no, err = p.orExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{pos: pos, cond: cond, yes: e, no: no}
	}
	return e, nil
}

func (p *parser) orExpr() (expr, error) {
	l, err := p.andExpr()
	for err == nil && p.isName("or") {
		t := p.next()
		var r expr
		if r, err = p.andExpr(); err == nil {
			l = &binaryExpr{pos: t.pos, op: "or", l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) andExpr() (expr, error) {
	l, err := p.notExpr()
	for err == nil && p.isName("and") {
		t := p.next()
		var r expr
		if r, err = p.notExpr(); err == nil {
			l = &binaryExpr{pos: t.pos, op: "and", l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) notExpr() (expr, error) {
	if p.isName("not") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.notExpr()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: t.pos, op: "not", x: x}, nil
	}
	return p.compare()
}

func (p *parser) compare() (expr, error) {
	l, err := p.concat()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			p.next()
		case t.kind == tName && t.val == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.val == "not" && p.toks[p.i+1].kind == tName && p.toks[p.i+1].val == "in":
			op = "not in"
			p.next()
			p.next()
		default:
			return l, nil
		}
		r, err := p.concat()
		if err != nil {
			return nil, err
		}
		l = &binaryExpr{pos: t.pos, op: op, l: l, r: r}
	}
}

func (p *parser) concat() (expr, error) {
	l, err := p.math1()
	for err == nil && p.isOp("~") {
		t := p.next()
		var r expr
		if r, err = p.math1(); err == nil {
			l = &binaryExpr{pos: t.pos, op: "~", l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) math1() (expr, error) {
	l, err := p.math2()
	for err == nil && (p.isOp("+") || p.isOp("-")) {
		t := p.next()
		var r expr
		if r, err = p.math2(); err == nil {
			l = &binaryExpr{pos: t.pos, op: t.val, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) math2() (expr, error) {
	l, err := p.pow()
	for err == nil && (p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%")) {
		t := p.next()
		var r expr
		if r, err = p.pow(); err == nil {
			l = &binaryExpr{pos: t.pos, op: t.val, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) pow() (expr, error) {
	l, err := p.unary()
	for err == nil && p.isOp("**") {
		t := p.next()
		var r expr
		if r, err = p.unary(); err == nil {
			l = &binaryExpr{pos: t.pos, op: "**", l: l, r: r}
		}
	}
	return l, err
}

// unary parses a signed operand and then its filters and tests, which
// apply to the signed value as in Jinja: -x|abs is (-x)|abs.
func (p *parser) unary() (expr, error) {
	e, err := p.signed()
	if err != nil {
		return nil, err
	}
	return p.filters(e)
}

func (p *parser) signed() (expr, error) {
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.signed()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos: t.pos, op: t.val, x: x}, nil
	}
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(e)
}

// filters parses `| f(args)` and `is [not] test args` after a value.
func (p *parser) filters(e expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			f, err := p.filterTail(e)
			if err != nil {
				return nil, err
			}
			e = f
		case p.isName("is"):
			t := p.next()
			neg := false
			if p.isName("not") {
				p.next()
				neg = true
			}
			name, _, err := p.expectName()
			if err != nil {
				return nil, err
			}
			te := &testExpr{pos: t.pos, arg: e, name: name, neg: neg}
			switch nt := p.peek(); {
			case p.isOp("("):
				c, err := p.callArgs(nil, nt.pos)
				if err != nil {
					return nil, err
				}
				te.args = c.args
			case nt.kind == tString || nt.kind == tInt || nt.kind == tFloat || nt.kind == tOp && (nt.val == "[" || nt.val == "{") ||
				nt.kind == tName && !slices.Contains([]string{"and", "or", "else", "if", "in", "not", "is"}, nt.val):
				a, err := p.primary()
				if err != nil {
					return nil, err
				}
				if a, err = p.postfix(a); err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			e = te
		default:
			return e, nil
		}
	}
}

func (p *parser) filterTail(arg expr) (*filterExpr, error) {
	name, pos, err := p.expectName()
	if err != nil {
		return nil, err
	}
	for p.isOp(".") { // dotted filter names are not used; keep the last part
		p.next()
		if name, _, err = p.expectName(); err != nil {
			return nil, err
		}
	}
	f := &filterExpr{pos: pos, arg: arg, name: name, call: &callExpr{pos: pos}}
	if p.isOp("(") {
		if f.call, err = p.callArgs(nil, pos); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (p *parser) postfix(e expr) (expr, error) {
	for {
		t := p.peek()
		switch {
		case p.isOp("."):
			p.next()
			nt := p.next()
			switch nt.kind {
			case tName:
				e = &attrExpr{pos: nt.pos, obj: e, name: nt.val}
			case tInt:
				e = &indexExpr{pos: nt.pos, obj: e, index: &literal{pos: nt.pos, v: nt.num}}
			default:
				return nil, p.errf(nt.pos, "expected an attribute name, found %s", describe(nt))
			}
		case p.isOp("["):
			p.next()
			ie := &indexExpr{pos: t.pos, obj: e}
			var parts [3]expr
			colons := 0
			for {
				if p.isOp(":") {
					p.next()
					colons++
					if colons > 2 {
						return nil, p.errf(t.pos, "bad slice")
					}
					continue
				}
				if p.isOp("]") {
					break
				}
				x, err := p.expr()
				if err != nil {
					return nil, err
				}
				if parts[colons] != nil {
					return nil, p.errf(x.position(), "expected ']'")
				}
				parts[colons] = x
			}
			p.next()
			if colons == 0 {
				if parts[0] == nil {
					return nil, p.errf(t.pos, "empty subscript")
				}
				ie.index = parts[0]
			} else {
				ie.isSlice = true
				ie.lo, ie.hi, ie.step = parts[0], parts[1], parts[2]
			}
			e = ie
		case p.isOp("("):
			c, err := p.callArgs(e, t.pos)
			if err != nil {
				return nil, err
			}
			e = c
		default:
			return e, nil
		}
	}
}

func (p *parser) callArgs(fn expr, pos Pos) (*callExpr, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	c := &callExpr{pos: pos, fn: fn}
	for !p.isOp(")") {
		if t := p.peek(); t.kind == tName && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].val == "=" {
			p.next()
			p.next()
			v, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.kwKeys, c.kwVals = append(c.kwKeys, t.val), append(c.kwVals, v)
		} else {
			a, err := p.expr()
			if err != nil {
				return nil, err
			}
			c.args = append(c.args, a)
		}
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return c, p.expectOp(")")
}

func (p *parser) primary() (expr, error) {
	t := p.next()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch t.kind {
	case tString:
		s := t.val
		for p.peek().kind == tString { // adjacent literals concatenate
			s += p.next().val
		}
		return &literal{pos: t.pos, v: Text(s)}, nil
	case tInt:
		return &literal{pos: t.pos, v: t.num}, nil
	case tFloat:
		return &literal{pos: t.pos, v: t.fnum}, nil
	case tName:
		switch t.val {
		case "true", "True":
			return &literal{pos: t.pos, v: true}, nil
		case "false", "False":
			return &literal{pos: t.pos, v: false}, nil
		case "none", "None":
			return &literal{pos: t.pos, v: nil}, nil
		}
		return &nameExpr{pos: t.pos, name: t.val}, nil
	case tOp:
		switch t.val {
		case "(":
			if p.isOp(")") {
				p.next()
				return &listExpr{pos: t.pos, tuple: true}, nil
			}
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{e}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					x, err := p.expr()
					if err != nil {
						return nil, err
					}
					items = append(items, x)
				}
				e = &listExpr{pos: t.pos, items: items, tuple: true}
			}
			return e, p.expectOp(")")
		case "[":
			l := &listExpr{pos: t.pos}
			for !p.isOp("]") {
				x, err := p.expr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			return l, p.expectOp("]")
		case "{":
			d := &dictExpr{pos: t.pos}
			for !p.isOp("}") {
				k, err := p.expr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.expr()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			return d, p.expectOp("}")
		}
	}
	return nil, p.errf(t.pos, "unexpected %s", describe(t))
}
