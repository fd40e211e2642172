package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat/jinja"
)

// KindJinja is a template this package does not recognise, rendered from
// the model's own Jinja source.
const KindJinja Kind = "jinja"

// Specials is what a model's vocabulary tells a Jinja template: the
// bos_token and eos_token it is given, which texts are control tokens, and
// which tokens end a reply.
type Specials struct {
	BOS, EOS string
	// AddBOS: the tokenizer adds the BOS itself, so a BOS the template
	// writes first is dropped (as llama.cpp does), not doubled.
	AddBOS bool
	// Markers are the control tokens' texts: in the template's own text
	// they are encoded as control tokens; in message text never.
	Markers []string
	// Stops are the texts of the end-of-generation tokens.
	Stops []string
}

// endMarks are texts that end a turn in the families llama.cpp knows; a
// vocabulary that has one stops generation at it, as llama.cpp's
// end-of-generation set does.
var endMarks = []string{
	"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>",
}

// Token types of a GGUF vocabulary (tokenizer.ggml.token_type).
const (
	tokenControl     = 3
	tokenUserDefined = 4
)

// SpecialsFromGGUF reads Specials from a file's tokenizer metadata. Only
// the control tokens that the template's source mentions (or BOS and EOS)
// become markers: a template can write no other.
func SpecialsFromGGUF(kv gguf.Metadata, src string) Specials {
	var sp Specials
	tokens, _ := kv.Strings("tokenizer.ggml.tokens")
	types, _ := kv.Int32s("tokenizer.ggml.token_type")
	text := func(key string) string {
		id, ok := kv.Uint(key)
		if !ok || id >= uint64(len(tokens)) {
			return ""
		}
		return tokens[id]
	}
	sp.BOS, sp.EOS = text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id")
	sp.AddBOS, _ = kv.Bool("tokenizer.ggml.add_bos_token")
	stops := map[string]bool{}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if s := text(k); s != "" {
			stops[s] = true
		}
	}
	markers := map[string]bool{}
	for id, tok := range tokens {
		if slices.Contains(endMarks, tok) {
			stops[tok] = true
		}
		// User-defined tokens that are only whitespace (Gemma's runs of
		// newlines and tabs) are matched by the tokenizer in any text; they
		// mark nothing.
		if id < len(types) && (types[id] == tokenControl || types[id] == tokenUserDefined && strings.TrimSpace(tok) != "") && tok != "" &&
			(tok == sp.BOS || tok == sp.EOS || strings.Contains(src, tok)) {
			markers[tok] = true
		}
	}
	sp.Markers, sp.Stops = sortedKeys(markers), sortedKeys(stops)
	return sp
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jinjaState is a Jinja template ready to render.
type jinjaState struct {
	tpl        *jinja.Template
	sp         Specials
	markers    []string // longest first, so a marker that contains another wins
	systemRole bool     // the template shows a system message
	stringArgs bool     // the template takes a tool call's arguments as JSON text, not an object
	now        func() time.Time
}

// FromJinja makes a template that renders src with the Jinja engine. It
// fails when src does not parse, or cannot render a plain conversation.
func FromJinja(src string, sp Specials) (*Template, error) {
	tpl, err := jinja.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	st := &jinjaState{tpl: tpl, sp: sp, now: time.Now}
	st.markers = append([]string(nil), sp.Markers...)
	sort.SliceStable(st.markers, func(i, j int) bool { return len(st.markers[i]) > len(st.markers[j]) })
	t := &Template{Kind: KindJinja, Source: src, Recognized: true, jinja: st}
	// Does the template show a system message? Some raise on one, some drop
	// it; for those, llama.cpp moves the system prompt into the first user
	// message, and so does Pieces.
	const needle = "<<system needle>>"
	sys, err := st.render(toolMessages([]Message{{Role: RoleSystem, Content: needle}, {Role: RoleUser, Content: "hi"}}), nil, true, false)
	st.systemRole = err == nil && strings.Contains(sys.S, needle)
	if _, err := st.render(toolMessages([]Message{{Role: RoleUser, Content: "hi"}}), nil, true, false); err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	// Tool-call arguments go in as an object, as llama.cpp gives them to
	// templates that take one; a template that fails on the object but not
	// on the JSON text (one that writes `'…' + arguments`) gets the text.
	call := []ToolMessage{{Message: Message{Role: RoleUser, Content: "hi"}},
		{Message: Message{Role: RoleAssistant}, ToolCalls: []ToolCall{{ID: "call00001", Name: "f", Arguments: `{"a": 1}`}}}}
	if _, err := st.render(call, nil, false, false); err != nil {
		st.stringArgs = true
		if _, err := st.render(call, nil, false, false); err != nil {
			st.stringArgs = false
		}
	}
	return t, nil
}

// ErrNoTools: the template is a built-in one, which does not write tool
// definitions or calls (the server writes them into the system prompt).
var ErrNoTools = errors.New("this chat template does not take tools")

// Prompt is Pieces with the template's error: a Jinja template may refuse a
// conversation (raise_exception, e.g. on roles that do not alternate).
func (t *Template) Prompt(msgs []Message, addGenerationPrompt, think bool) ([]Piece, error) {
	if t.jinja == nil {
		return t.Pieces(msgs, addGenerationPrompt, think), nil
	}
	return t.jinja.pieces(toolMessages(msgs), nil, addGenerationPrompt, think)
}

// PromptTools is Prompt with tool definitions (OpenAI's {"type":
// "function", "function": {...}} objects) given to the template as
// `tools`, and the messages' tool calls and tool results shown as the
// template writes them. Only KindJinja templates take tools.
func (t *Template) PromptTools(msgs []ToolMessage, tools []json.RawMessage, addGenerationPrompt, think bool) ([]Piece, error) {
	plain := make([]Message, len(msgs))
	hasCalls := false
	for i, m := range msgs {
		plain[i] = m.Message
		hasCalls = hasCalls || len(m.ToolCalls) > 0
	}
	if t.jinja == nil {
		if len(tools) > 0 || hasCalls {
			return nil, ErrNoTools
		}
		return t.Pieces(plain, addGenerationPrompt, think), nil
	}
	list := &jinja.List{}
	for i, raw := range tools {
		v, err := jinja.FromJSON(raw, true)
		if err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
		list.Items = append(list.Items, v)
	}
	return t.jinja.pieces(msgs, list, addGenerationPrompt, think)
}

// ContinueTools is PromptTools with the last message, the assistant's,
// left open for the reply to continue (see Continue).
func (t *Template) ContinueTools(msgs []ToolMessage, tools []json.RawMessage, think bool) ([]Piece, error) {
	if t.jinja == nil || len(msgs) == 0 {
		return nil, ErrNoTools
	}
	ms := slices.Clone(msgs)
	ms[len(ms)-1].Content += prefillMark
	out, err := t.PromptTools(ms, tools, false, think)
	if err != nil {
		return nil, err
	}
	if cut, ok := cutAtMark(out); ok {
		return cut, nil
	}
	return t.PromptTools(msgs[:len(msgs)-1], tools, true, think)
}

// toolMessages wraps plain messages.
func toolMessages(msgs []Message) []ToolMessage {
	out := make([]ToolMessage, len(msgs))
	for i, m := range msgs {
		out[i] = ToolMessage{Message: m}
	}
	return out
}

// alternate merges consecutive turns of one role (joined by a blank line)
// and drops assistant turns before the first user turn: the shape that
// templates which raise on anything else (Llama 2, Mistral, Gemma) accept.
func alternate(msgs []Message) []Message {
	var out []Message
	for _, m := range msgs {
		n := len(out)
		switch {
		case n > 0 && out[n-1].Role == m.Role:
			out[n-1].Content += "\n\n" + m.Content
		case m.Role == RoleAssistant && !slices.ContainsFunc(out, func(o Message) bool { return o.Role == RoleUser }):
		default:
			out = append(out, m)
		}
	}
	return out
}

func (st *jinjaState) pieces(msgs []ToolMessage, tools *jinja.List, addGenerationPrompt, think bool) ([]Piece, error) {
	if !st.systemRole && len(msgs) > 0 && msgs[0].Role == RoleSystem {
		rest := slices.Clone(msgs[1:])
		if len(rest) > 0 {
			rest[0].Content = msgs[0].Content + "\n" + rest[0].Content
		}
		msgs = rest
	}
	out, err := st.render(msgs, tools, addGenerationPrompt, think)
	if err != nil {
		return nil, err
	}
	segs := out.Segments()
	if st.sp.AddBOS && st.sp.BOS != "" && len(segs) > 0 && !segs[0].Data && strings.HasPrefix(segs[0].Text, st.sp.BOS) {
		segs[0].Text = segs[0].Text[len(st.sp.BOS):]
	}
	var b pieces
	for _, s := range segs {
		if s.Data {
			b.text(s.Text)
			continue
		}
		st.split(&b, s.Text)
	}
	return b.out, nil
}

// split cuts the template's own text at its control tokens.
func (st *jinjaState) split(b *pieces, s string) {
	for s != "" {
		at, which := len(s), ""
		for _, m := range st.markers {
			if i := strings.Index(s, m); i >= 0 && i < at {
				at, which = i, m
			}
		}
		b.text(s[:at])
		if which == "" {
			return
		}
		b.special(which)
		s = s[at+len(which):]
	}
}

// message is m as templates expect it: OpenAI's shape, a tool call's
// arguments an object when they parse as one (as llama.cpp gives them to
// templates that take objects, which the families here all do).
func message(m ToolMessage, stringArgs bool) *jinja.Dict {
	d := jinja.NewDict()
	d.Set("role", jinja.Data(m.Role))
	d.Set("content", jinja.Data(m.Content))
	if m.Thinking != "" {
		d.Set("reasoning_content", jinja.Data(m.Thinking))
	}
	if len(m.ToolCalls) > 0 {
		calls := &jinja.List{}
		for _, c := range m.ToolCalls {
			fn := jinja.NewDict()
			fn.Set("name", jinja.Data(c.Name))
			args, err := jinja.FromJSON([]byte(c.Arguments), true)
			if _, isObject := args.(*jinja.Dict); err != nil || !isObject || stringArgs {
				args = jinja.Data(c.Arguments)
			}
			fn.Set("arguments", args)
			call := jinja.NewDict()
			call.Set("id", jinja.Data(c.ID))
			call.Set("type", jinja.Text("function"))
			call.Set("function", fn)
			calls.Items = append(calls.Items, call)
		}
		d.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.Data(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", jinja.Data(m.Name))
	}
	return d
}

func (st *jinjaState) render(msgs []ToolMessage, tools *jinja.List, addGenerationPrompt, think bool) (jinja.Str, error) {
	list := &jinja.List{}
	for _, m := range msgs {
		list.Items = append(list.Items, message(m, st.stringArgs))
	}
	now := st.now()
	vars := jinja.NewDict()
	vars.Set("messages", list)
	vars.Set("bos_token", jinja.Text(st.sp.BOS))
	vars.Set("eos_token", jinja.Text(st.sp.EOS))
	vars.Set("add_generation_prompt", addGenerationPrompt)
	vars.Set("enable_thinking", think)
	if tools != nil {
		vars.Set("tools", tools)
	}
	// What llama.cpp adds to every render (Llama 3.1 prints date_string).
	vars.Set("date_string", jinja.Text(now.Format("02 Jan 2006")))
	vars.Set("datetime", jinja.Text(now.Format("Jan 02 2006")))
	// The step budget grows with the conversation (templates take about a
	// hundred steps a message), so only a runaway template meets it.
	limits := jinja.Limits{Steps: jinja.DefaultSteps + 1000*len(msgs)}
	return st.tpl.RenderValues(vars, jinja.Options{Now: func() time.Time { return now }, Limits: limits})
}
