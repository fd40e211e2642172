// Package jinja renders the Jinja2 subset that Hugging Face chat templates
// use (the `tokenizer.chat_template` a GGUF file carries), with the
// environment transformers gives them: trim_blocks and lstrip_blocks on,
// raise_exception, strftime_now, namespace, loop controls, and Python's
// string and dict methods.
//
// Rendering is bounded: a step budget, an output cap and a nesting limit stop
// a hostile template, and every failure is an *Error carrying the
// template's line and column, never a panic.
package jinja

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, wrapped by *Error.
var (
	// ErrSyntax: the template does not parse.
	ErrSyntax = errors.New("template syntax error")
	// ErrRaised: the template called raise_exception (it refuses the
	// conversation, e.g. roles that do not alternate).
	ErrRaised = errors.New("template raised an exception")
	// ErrLimit: the template ran past a step, output or nesting limit.
	ErrLimit = errors.New("template exceeded a limit")
	// ErrRender: a type or value error while rendering.
	ErrRender = errors.New("template error")
)

// Error is a failure at a place in the template.
type Error struct {
	Pos Pos
	Msg string
	Err error // one of the sentinels
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %s", e.Pos, e.Err, e.Msg) }

func (e *Error) Unwrap() error { return e.Err }

// Template is a parsed template, safe for concurrent Render calls.
type Template struct {
	body []node
}

// Parse parses src.
func Parse(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil { // a parser bug must not take the process down
			t, err = nil, &Error{Msg: fmt.Sprint("internal error: ", r), Err: ErrSyntax}
		}
	}()
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, _, err := p.body()
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Limits bound a render. Zero fields take the defaults.
type Limits struct {
	Steps  int // evaluation steps (default DefaultSteps)
	Output int // bytes of output (default 16 MiB)
	Depth  int // macro-call and loop nesting (default 100)
}

// DefaultSteps is the default step budget. The chat templates of
// testdata take 70 to 110 steps a message (Llama 3.1: 32763 for 400
// messages; Qwen3: 44381), so this renders some 20,000 messages, and stops a
// runaway template in about a second.
const DefaultSteps = 2_000_000

// Options are the environment of one render.
type Options struct {
	Limits Limits
	// Now is the clock strftime_now reads (default time.Now).
	Now func() time.Time
}

// Render renders t with the variables in vars (converted with FromGo).
func (t *Template) Render(vars map[string]any, opts Options) (Str, error) {
	ctx := NewDict()
	for k, v := range vars {
		ctx.Set(k, FromGo(v))
	}
	return t.RenderValues(ctx, opts)
}

// RenderValues renders t with vars already converted to template values.
func (t *Template) RenderValues(vars *Dict, opts Options) (out Str, err error) {
	e := newEvaluator(opts)
	global := &scope{vars: map[string]Value{}}
	for _, k := range vars.Keys() {
		global.vars[k] = vars.m[k]
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = Str{}, &Error{Msg: fmt.Sprint("internal error: ", r), Err: ErrRender}
		}
	}()
	var w writer
	if err := e.exec(t.body, &scope{parent: global, vars: map[string]Value{}}, &w); err != nil {
		var ctl *loopControl
		if errors.As(err, &ctl) {
			return Str{}, &Error{Pos: ctl.pos, Msg: "break or continue outside a loop", Err: ErrRender}
		}
		return Str{}, err
	}
	return w.str(), nil
}
