package serve

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/grammar"
	"github.com/bonsai-chat/bonsai/infer/openai"
)

// toolFormat is how a family's template has the model write tool calls.
type toolFormat int

const (
	// hermesTools: <tool_call>{"name": …, "arguments": {…}}</tool_call>
	// (Qwen2.5, Qwen3, Hermes; the built-in templates).
	hermesTools toolFormat = iota
	// llama3Tools: one JSON object {"name": …, "parameters": {…}}, bare or
	// after <|python_tag|> (Llama 3.1, 3.2, 3.3).
	llama3Tools
	// mistralTools: [TOOL_CALLS][{"name": …, "arguments": {…}}, …]
	// (Mistral 7B v0.3, Nemo, Small 3), tool results as [TOOL_RESULTS] with
	// the call's id, which the template wants as 9 letters and digits.
	mistralTools
	// mistralArgsTools: [TOOL_CALLS]name[ARGS]{…} for each call, after any
	// text (Mistral Small 3.2, Magistral, Ministral 3, Devstral: the v11
	// tokenizer's templates), ids as mistralTools'.
	mistralArgsTools
	// genericTools: a template that writes no tools (Gemma 3, Gemma 2,
	// Llama 2, Mistral v0.1/v0.2, Phi-3): the tools are described in the
	// system prompt and the model answers with one JSON object,
	// {"tool_call": {"name": …, "arguments": {…}}}, {"tool_calls": […]} or
	// {"response": "…"}, as llama.cpp's generic format has it.
	genericTools
)

// Markers of the JSON-call families' replies.
const (
	pythonTag     = "<|python_tag|>"
	mistralTC     = "[TOOL_CALLS]"
	mistralArgs   = "[ARGS]"
	mistralCallID = "[CALL_ID]"
)

// toolFormatOf reads the call format from the template's source, as
// llama.cpp picks its parser from what the template mentions.
func toolFormatOf(t *chat.Template) toolFormat {
	src := t.Source
	switch {
	case t.Kind != chat.KindJinja || strings.Contains(src, toolOpen):
		return hermesTools
	case strings.Contains(src, mistralTC) && strings.Contains(src, mistralArgs):
		return mistralArgsTools
	case strings.Contains(src, mistralTC):
		return mistralTools
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, "parameters"):
		return llama3Tools
	case !strings.Contains(src, "tool"):
		return genericTools
	}
	return hermesTools
}

// argsKey is the call object's key for the arguments.
func (f toolFormat) argsKey() string {
	if f == llama3Tools {
		return "parameters"
	}
	return "arguments"
}

// wrap constrains a required call: the markup around the call object
// (a marker that is a control token, such as Mistral's [TOOL_CALLS], may
// come as that token or spelled in text, which the parser takes alike).
// mistralArgsTools names the tool in the markup: toolMachine makes one
// reading per tool instead.
func (f toolFormat) wrap(call *grammar.Schema) *grammar.Machine {
	switch f {
	case llama3Tools:
		return grammar.NewWrapped("", call, "")
	case mistralTools:
		return grammar.NewWrappedSpaced(mistralTC, grammar.Items(call, 1, 1), "")
	case genericTools:
		return grammar.NewWrapped("", grammar.Keyed("tool_call", call), "")
	}
	return grammar.NewWrapped(toolOpen+"\n", call, "\n"+toolClose)
}

// parser takes the family's calls out of the reply.
func (f toolFormat) parser() callParser {
	switch f {
	case llama3Tools:
		return &jsonCallParser{marker: pythonTag}
	case mistralTools:
		return &jsonCallParser{marker: mistralTC}
	case mistralArgsTools:
		return &argsCallParser{}
	case genericTools:
		return &genericParser{}
	}
	return &toolParser{}
}

// callID is a new call's id: 9 letters and digits for Mistral, whose
// templates refuse any other (llama.cpp gives them the same), else
// OpenAI's "call_…".
func (f toolFormat) callID() string {
	if f.mistral() {
		return alnumID(9)
	}
	return newID("call_")
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// alnumID is n random letters and digits.
func alnumID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

// mistralIDSchema is a Mistral call id's: 9 letters and digits
// (TestToolMachinePerFamily checks that it compiles).
var mistralIDSchema, _ = grammar.Compile([]byte(`{"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"}`))

// mistral says the format is one of Mistral's, whose templates want ids of
// 9 letters and digits.
func (f toolFormat) mistral() bool { return f == mistralTools || f == mistralArgsTools }

// mistralID is the id a Mistral template is given for a call or result
// id: the id itself where it is 9 letters and digits, else 9 taken from
// its hash, so that a call and its result, written by a client that makes
// its own ids (or by another API's "toolu_…"), still match.
func mistralID(id string) string {
	if len(id) == 9 && strings.Trim(id, alnum) == "" {
		return id
	}
	h := sha256.Sum256([]byte(id))
	b := make([]byte, 9)
	for i := range b {
		b[i] = alnum[int(h[i])%len(alnum)]
	}
	return string(b)
}

// callParser splits a reply into text and tool calls as it streams.
type callParser interface {
	feed(s string) (text string, calls []toolCall)
	flush() (text string, calls []toolCall)
}

// jsonCallParser takes the calls of a family that writes them as the whole
// reply: JSON after an optional marker. A reply that could be one (it
// opens with the marker, "{" or "[") is held to the end and parsed; one
// that does not parse goes out as text. Any other reply streams as text.
type jsonCallParser struct {
	marker  string
	decided bool // the reply is plain text
	held    strings.Builder
	lead    int // the held text's leading whitespace so far
}

// opening is the held text after its leading whitespace, each byte of
// which is looked at once (a reply of blank lines cost each step all of
// them).
func opening(held *strings.Builder, lead *int) string {
	t := held.String()[*lead:]
	n := len(t) - len(strings.TrimLeft(t, " \n\t\r"))
	*lead += n
	return t[n:]
}

func (p *jsonCallParser) feed(s string) (string, []toolCall) {
	if p.decided {
		return s, nil
	}
	p.held.WriteString(s)
	t := opening(&p.held, &p.lead)
	switch {
	case t == "" || strings.HasPrefix(p.marker, t):
		return "", nil // undecided
	case strings.HasPrefix(t, p.marker) || t[0] == '{' || t[0] == '[':
		return "", nil // a call, perhaps: parsed at the end
	}
	p.decided = true
	out := p.held.String()
	p.held.Reset()
	return out, nil
}

func (p *jsonCallParser) flush() (string, []toolCall) {
	body := p.held.String()
	p.held.Reset()
	if p.decided {
		return body, nil
	}
	t := strings.TrimSpace(body)
	t = strings.TrimSpace(strings.TrimPrefix(t, p.marker))
	if calls, ok := parseJSONCalls(t); ok {
		return "", calls
	}
	return body, nil
}

// parseJSONCalls reads one or more calls: objects, arrays of objects, or
// several separated by ";" or whitespace (Llama 3.1 writes "a; b").
func parseJSONCalls(s string) ([]toolCall, bool) {
	var calls []toolCall
	for {
		s = strings.TrimLeft(s, " \n\t\r")
		if s == "" {
			return calls, len(calls) > 0
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		items := []json.RawMessage{raw}
		if raw = bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '[' {
			if json.Unmarshal(raw, &items) != nil {
				return nil, false
			}
		}
		for _, item := range items {
			c, ok := parseToolCall(string(item))
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
		}
		s = strings.TrimLeft(s[dec.InputOffset():], " \n\t\r")
		s = strings.TrimPrefix(s, ";")
	}
}

// argsCallParser takes the calls of mistralArgsTools: the text before the
// first [TOOL_CALLS] streams; from there the reply is held and read at the
// end as calls, [TOOL_CALLS]name[CALL_ID]id[ARGS]{…} (the id optional), or
// goes out as text where it is not.
type argsCallParser struct {
	inCalls bool
	held    string // text that may begin [TOOL_CALLS]
	calls   strings.Builder
}

func (p *argsCallParser) feed(s string) (string, []toolCall) {
	if p.inCalls {
		p.calls.WriteString(s)
		return "", nil
	}
	t := p.held + s
	if i := strings.Index(t, mistralTC); i >= 0 {
		p.inCalls, p.held = true, ""
		p.calls.WriteString(t[i:])
		return t[:i], nil
	}
	keep := heldSuffix(t, []string{mistralTC})
	p.held = t[len(t)-keep:]
	return t[:len(t)-keep], nil
}

func (p *argsCallParser) flush() (string, []toolCall) {
	if !p.inCalls {
		held := p.held
		p.held = ""
		return held, nil
	}
	body := p.calls.String()
	p.calls.Reset()
	p.inCalls = false
	if calls, ok := parseArgsCalls(body); ok {
		return "", calls
	}
	return body, nil
}

// parseArgsCalls reads [TOOL_CALLS]name[CALL_ID]id[ARGS]{…}, repeated.
func parseArgsCalls(s string) ([]toolCall, bool) {
	var calls []toolCall
	for {
		s = strings.TrimLeft(s, " \n\t\r")
		if s == "" {
			return calls, len(calls) > 0
		}
		rest, ok := strings.CutPrefix(s, mistralTC)
		if !ok {
			return nil, false
		}
		head, args, ok := strings.Cut(rest, mistralArgs)
		if !ok {
			return nil, false
		}
		name, id, _ := strings.Cut(head, mistralCallID)
		name, id = strings.TrimSpace(name), strings.TrimSpace(id)
		if name == "" || strings.ContainsAny(name, "[]{}\"\n") {
			return nil, false
		}
		dec := json.NewDecoder(strings.NewReader(args))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
			return nil, false
		}
		calls = append(calls, toolCall{Name: name, Arguments: string(bytes.TrimSpace(raw)), ID: id})
		s = args[dec.InputOffset():]
	}
}

// toolMessages turns the API's messages into the template's own: tool
// calls and results as fields, for a Jinja template to write as its family
// does.
func toolMessages(in []openai.Message, f toolFormat) ([]chat.ToolMessage, *apiError) {
	if len(in) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	out := make([]chat.ToolMessage, 0, len(in))
	for i, msg := range in {
		m := chat.ToolMessage{Message: chat.Message{Role: msg.Role, Content: string(msg.Content)}}
		switch msg.Role {
		case "system", "developer":
			m.Role = chat.RoleSystem
		case "user":
		case "assistant":
			m.Thinking = msg.ReasoningContent
			for _, tc := range msg.ToolCalls {
				args := tc.Function.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				id := tc.ID
				if f.mistral() {
					id = mistralID(id)
				}
				m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
			}
		case "tool":
			m.ToolCallID, m.Name = msg.ToolCallID, msg.Name
			if f.mistral() {
				m.ToolCallID = mistralID(m.ToolCallID)
			}
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "role must be system, user, assistant or tool, not %q", msg.Role)
		}
		out = append(out, m)
	}
	return out, nil
}

// toolDefs are the tools as the template takes them: OpenAI's objects.
func toolDefs(tools []openai.Tool) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		if t.Type == "" {
			t.Type = "function"
		}
		raw, err := json.Marshal(t)
		if err == nil {
			out = append(out, raw)
		}
	}
	return out
}

// usesJinjaTools: the request's tools (or tool turns) go to the model's own
// Jinja template, which writes them as its family expects.
func usesJinjaTools(t *chat.Template, msgs []openai.Message, tools []openai.Tool) bool {
	// A template that never mentions tools would drop them: those get the
	// built-in tool prompt instead (convertMessages).
	if t.Kind != chat.KindJinja || !strings.Contains(t.Source, "tool") {
		return false
	}
	if len(tools) > 0 {
		return true
	}
	for _, m := range msgs {
		if m.Role == "tool" || len(m.ToolCalls) > 0 {
			return true
		}
	}
	return false
}
