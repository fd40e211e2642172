package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pos is a place in the template source, 1-based.
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

type tokKind int

const (
	tEOF tokKind = iota
	tText
	tVarOpen    // {{
	tVarClose   // }}
	tBlockOpen  // {%
	tBlockClose // %}
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // text, name, operator, decoded string
	num  int64
	fnum float64
	pos  Pos
}

// lexer turns the source into tokens, applying the whitespace rules of
// Hugging Face's chat-template environment: trim_blocks (the newline after
// a block tag goes) and lstrip_blocks (spaces and tabs before a block tag on
// its own line go), and the explicit '-' controls.
type lexer struct {
	src         string
	i           int
	line, col   int
	toks        []token
	trimNext    bool // a '-' closed the last tag: strip the next text's leading whitespace
	afterBlock  bool // the last tag was a block or comment (trim_blocks applies)
	keepNewline bool // the last tag closed with +%}: trim_blocks does not apply
}

func lex(src string) ([]token, error) {
	lx := &lexer{src: src, line: 1, col: 1}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) pos() Pos { return Pos{lx.line, lx.col} }

func (lx *lexer) advance(n int) {
	for _, r := range lx.src[lx.i : lx.i+n] {
		if r == '\n' {
			lx.line++
			lx.col = 1
		} else {
			lx.col++
		}
	}
	lx.i += n
}

func (lx *lexer) errf(p Pos, format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Err: ErrSyntax}
}

func (lx *lexer) run() error {
	for lx.i < len(lx.src) {
		start := lx.pos()
		j := nextTag(lx.src, lx.i)
		text := lx.src[lx.i:j]
		lx.advance(j - lx.i)
		lineStart := start.Col == 1
		if lx.afterBlock {
			if strings.HasPrefix(text, "\n") {
				text, lineStart = text[1:], true
			} else if strings.HasPrefix(text, "\r\n") {
				text, lineStart = text[2:], true
			}
		}
		if lx.trimNext {
			text = strings.TrimLeft(text, " \t\n\r")
		}
		lx.trimNext, lx.afterBlock = false, false
		if j >= len(lx.src) {
			lx.emitText(text, start)
			break
		}
		open := lx.src[j : j+2]
		rest := lx.src[j+2:]
		minus := strings.HasPrefix(rest, "-")
		plus := strings.HasPrefix(rest, "+")
		switch {
		case minus:
			text = strings.TrimRight(text, " \t\n\r")
		case open != "{{" && !plus:
			// lstrip_blocks: only when the tag starts its line.
			k := strings.LastIndexAny(text, "\n")
			tail := text[k+1:]
			if strings.Trim(tail, " \t") == "" && (k >= 0 || lineStart) {
				text = text[:k+1]
			}
		}
		lx.emitText(text, start)
		tagPos := lx.pos()
		lx.advance(2)
		if minus || plus {
			lx.advance(1)
		}
		switch open {
		case "{#":
			end := strings.Index(lx.src[lx.i:], "#}")
			if end < 0 {
				return lx.errf(tagPos, "comment not closed with #}")
			}
			lx.trimNext = end > 0 && lx.src[lx.i+end-1] == '-'
			lx.advance(end + 2)
			lx.afterBlock = true
		case "{{":
			lx.toks = append(lx.toks, token{kind: tVarOpen, pos: tagPos})
			if err := lx.inside("}}"); err != nil {
				return err
			}
		case "{%":
			lx.toks = append(lx.toks, token{kind: tBlockOpen, pos: tagPos})
			if err := lx.inside("%}"); err != nil {
				return err
			}
			lx.afterBlock = !lx.keepNewline
			if err := lx.raw(); err != nil {
				return err
			}
		}
	}
	lx.toks = append(lx.toks, token{kind: tEOF, pos: lx.pos()})
	return nil
}

func (lx *lexer) emitText(text string, p Pos) {
	if text != "" {
		lx.toks = append(lx.toks, token{kind: tText, val: text, pos: p})
	}
}

// nextTag finds the next {{, {% or {# at or after i (len(src) if none).
func nextTag(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return len(src)
		}
		switch src[i+k+1] {
		case '{', '%', '#':
			return i + k
		}
		i += k + 1
	}
}

// raw handles {% raw %}: the text up to {% endraw %} is kept as is.
func (lx *lexer) raw() error {
	n := len(lx.toks)
	if n < 3 || lx.toks[n-3].kind != tBlockOpen || lx.toks[n-2].kind != tName || lx.toks[n-2].val != "raw" {
		return nil
	}
	p := lx.toks[n-3].pos
	lx.toks = lx.toks[:n-3]
	rest := lx.src[lx.i:]
	for k := 0; ; {
		j := strings.Index(rest[k:], "{%")
		if j < 0 {
			return lx.errf(p, "raw block not closed with {%% endraw %%}")
		}
		j += k
		inner := strings.TrimLeft(rest[j+2:], "-+ \t\n\r")
		if strings.HasPrefix(inner, "endraw") {
			end := strings.Index(rest[j:], "%}")
			if end < 0 {
				return lx.errf(p, "raw block not closed")
			}
			text := rest[:j]
			if strings.HasPrefix(rest[j+2:], "-") {
				text = strings.TrimRight(text, " \t\n\r")
			}
			lx.emitText(text, lx.pos())
			lx.trimNext = rest[j+end-1] == '-'
			lx.advance(j + end + 2)
			lx.afterBlock = true
			return nil
		}
		k = j + 2
	}
}

// inside lexes the tokens of a tag up to its closing delimiter.
func (lx *lexer) inside(closer string) error {
	depth := 0 // open brackets: a '}}' inside a dict literal does not close
	open := lx.toks[len(lx.toks)-1].pos
	for {
		for lx.i < len(lx.src) && strings.IndexByte(" \t\n\r", lx.src[lx.i]) >= 0 {
			lx.advance(1)
		}
		if lx.i >= len(lx.src) {
			return lx.errf(open, "tag not closed with %s", closer)
		}
		p := lx.pos()
		rest := lx.src[lx.i:]
		if depth == 0 {
			if strings.HasPrefix(rest, "-"+closer) {
				lx.advance(3)
				lx.trimNext, lx.keepNewline = true, false
				lx.closeTag(closer, p)
				return nil
			}
			if strings.HasPrefix(rest, "+"+closer) {
				lx.advance(3)
				lx.keepNewline = true
				lx.closeTag(closer, p)
				return nil
			}
			if strings.HasPrefix(rest, closer) {
				lx.advance(2)
				lx.keepNewline = false
				lx.closeTag(closer, p)
				return nil
			}
		}
		c := rest[0]
		switch {
		case c == '\'' || c == '"':
			s, n, err := unquote(rest)
			if err != nil {
				return lx.errf(p, "%v", err)
			}
			lx.toks = append(lx.toks, token{kind: tString, val: s, pos: p})
			lx.advance(n)
		case c >= '0' && c <= '9':
			n := 0
			for n < len(rest) && (rest[n] >= '0' && rest[n] <= '9' || rest[n] == '_') {
				n++
			}
			isFloat := false
			if n+1 < len(rest) && rest[n] == '.' && rest[n+1] >= '0' && rest[n+1] <= '9' {
				isFloat = true
				n++
				for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
					n++
				}
			}
			if n < len(rest) && (rest[n] == 'e' || rest[n] == 'E') {
				m := n + 1
				if m < len(rest) && (rest[m] == '+' || rest[m] == '-') {
					m++
				}
				if m < len(rest) && rest[m] >= '0' && rest[m] <= '9' {
					isFloat = true
					for n = m; n < len(rest) && rest[n] >= '0' && rest[n] <= '9'; n++ {
					}
				}
			}
			lit := strings.ReplaceAll(rest[:n], "_", "")
			if isFloat {
				f, err := strconv.ParseFloat(lit, 64)
				if err != nil {
					return lx.errf(p, "bad number %q", rest[:n])
				}
				lx.toks = append(lx.toks, token{kind: tFloat, fnum: f, pos: p})
			} else {
				v, err := strconv.ParseInt(lit, 10, 64)
				if err != nil {
					return lx.errf(p, "bad number %q", rest[:n])
				}
				lx.toks = append(lx.toks, token{kind: tInt, num: v, pos: p})
			}
			lx.advance(n)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			n := 1
			for n < len(rest) && (rest[n] == '_' || rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z' || rest[n] >= '0' && rest[n] <= '9') {
				n++
			}
			lx.toks = append(lx.toks, token{kind: tName, val: rest[:n], pos: p})
			lx.advance(n)
		default:
			op := ""
			for _, o := range []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", "<", ">", "=", "?", "!"} {
				if strings.HasPrefix(rest, o) {
					op = o
					break
				}
			}
			if op == "" || op == "?" || op == "!" {
				r, _ := utf8.DecodeRuneInString(rest)
				return lx.errf(p, "unexpected character %q", r)
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			}
			lx.toks = append(lx.toks, token{kind: tOp, val: op, pos: p})
			lx.advance(len(op))
		}
	}
}

func (lx *lexer) closeTag(closer string, p Pos) {
	k := tVarClose
	if closer == "%}" {
		k = tBlockClose
	}
	lx.toks = append(lx.toks, token{kind: k, pos: p})
}

// unquote reads a quoted string literal at the start of s, with Python's
// escapes, and returns it and the bytes it took.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, nil
		case c == '\\' && i+1 < len(s):
			e := s[i+1]
			i += 2
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case '\\', '\'', '"':
				b.WriteByte(e)
			case '\n':
			case 'u', 'x', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+n > len(s) {
					return "", 0, fmt.Errorf("bad \\%c escape", e)
				}
				v, err := strconv.ParseUint(s[i:i+n], 16, 32)
				if err != nil || v > utf8.MaxRune {
					return "", 0, fmt.Errorf("bad \\%c escape", e)
				}
				b.WriteRune(rune(v))
				i += n
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", 0, fmt.Errorf("string not closed")
}
