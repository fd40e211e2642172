package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/openai"
)

// The generic tool format, for templates that write no tools (Gemma 3):
// what llama.cpp's generic chat format did for them, the tools listed in
// the system prompt and the reply one JSON object.

// genericAsk is llama.cpp's instruction for the generic format.
const genericAsk = "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request"

// genericExample shows the reply's shape after the tools.
const genericExample = "\n\nExample tool call syntax:\n\n{\n  \"tool_call\": {\n    \"name\": \"tool_name\",\n    \"arguments\": {\n      \"arg1\": \"some_value\"\n    }\n  }\n}"

// genericMessages writes a conversation with tools for a template that
// takes none: the system prompt asks for a JSON reply and lists the tools
// (appended to the conversation's own system prompt), the assistant's
// calls are the JSON it was asked for, and each tool result is a user
// turn {"tool_response": {"tool": …, "content": …, "tool_call_id": …}}
// (minja's polyfill; the template's alternation is kept by Pieces, which
// joins consecutive turns of one role).
func genericMessages(in []openai.Message, tools []openai.Tool) ([]chat.Message, *apiError) {
	var block string
	if len(tools) > 0 {
		list := make([]json.RawMessage, 0, len(tools))
		for _, t := range tools {
			list = append(list, json.RawMessage(toolJSON(t)))
		}
		block = genericAsk + "\n\nYou can call any of the following tools to satisfy the user's requests: " + indentJSON(list) + genericExample
	}
	names := map[string]string{} // call id → the function it called
	out := make([]chat.Message, 0, len(in)+1)
	for i, msg := range in {
		content := string(msg.Content)
		switch msg.Role {
		case "system", "developer":
			if i == 0 && block != "" {
				content += "\n\n" + block
				block = ""
			}
			out = append(out, chat.Message{Role: chat.RoleSystem, Content: content})
		case "user":
			out = append(out, chat.Message{Role: chat.RoleUser, Content: content})
		case "assistant":
			if len(msg.ToolCalls) > 0 {
				content = genericCalls(content, msg.ToolCalls)
				for _, tc := range msg.ToolCalls {
					names[tc.ID] = tc.Function.Name
				}
			}
			out = append(out, chat.Message{Role: chat.RoleAssistant, Content: content, Thinking: msg.ReasoningContent})
		case "tool":
			type response struct {
				Tool       string `json:"tool,omitempty"`
				Content    string `json:"content"`
				ToolCallID string `json:"tool_call_id,omitempty"`
			}
			r := response{Tool: msg.Name, Content: content, ToolCallID: msg.ToolCallID}
			if r.Tool == "" {
				r.Tool = names[msg.ToolCallID]
			}
			out = append(out, chat.Message{Role: chat.RoleUser, Content: indentJSON(map[string]response{"tool_response": r})})
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "role must be system, user, assistant or tool, not %q", msg.Role)
		}
	}
	if block != "" {
		out = append([]chat.Message{{Role: chat.RoleSystem, Content: block}}, out...)
	}
	return out, nil
}

// genericCalls is an assistant turn's calls as the generic format has the
// model write them: {"tool_call": …} for one, {"tool_calls": […]} for
// several, with the turn's text as "content".
func genericCalls(content string, calls []openai.ToolCall) string {
	type call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		ID        string          `json:"id,omitempty"`
	}
	list := make([]call, 0, len(calls))
	for _, tc := range calls {
		args := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		list = append(list, call{Name: tc.Function.Name, Arguments: args, ID: tc.ID})
	}
	var v any
	switch {
	case len(list) == 1 && content == "":
		v = map[string]call{"tool_call": list[0]}
	case content == "":
		v = map[string][]call{"tool_calls": list}
	default:
		v = struct {
			ToolCalls []call `json:"tool_calls"`
			Content   string `json:"content"`
		}{list, content}
	}
	return indentJSON(v)
}

// indentJSON is v as JSON indented by two spaces, as minja's dump(2)
// writes it (no HTML escapes).
func indentJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "{}"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// genericParser takes the reply of the generic format apart: one JSON
// object, perhaps in a ```json fence, with "tool_call", "tool_calls" or
// "response". A reply that opens otherwise streams as text; one held that
// is not such an object goes out as it came.
type genericParser struct {
	decided bool // the reply is plain text
	held    strings.Builder
	lead    int // the held text's leading whitespace so far
}

const fence = "```"

func (p *genericParser) feed(s string) (string, []toolCall) {
	if p.decided {
		return s, nil
	}
	p.held.WriteString(s)
	t := opening(&p.held, &p.lead)
	switch {
	case t == "" || strings.HasPrefix(fence, t):
		return "", nil // undecided
	case t[0] == '{' || strings.HasPrefix(t, fence):
		return "", nil // a JSON reply, perhaps: parsed at the end
	}
	p.decided = true
	out := p.held.String()
	p.held.Reset()
	return out, nil
}

func (p *genericParser) flush() (string, []toolCall) {
	body := p.held.String()
	p.held.Reset()
	if p.decided {
		return body, nil
	}
	if text, calls, ok := parseGeneric(body); ok {
		return text, calls
	}
	return body, nil
}

// parseGeneric reads a generic-format reply: the answer's text and the
// calls, ok false where it is not one.
func parseGeneric(body string) (string, []toolCall, bool) {
	t := strings.TrimSpace(body)
	if rest, ok := strings.CutPrefix(t, fence); ok {
		// ```json\n{…}\n```
		nl := strings.IndexByte(rest, '\n')
		inner, closed := strings.CutSuffix(rest, fence)
		if nl < 0 || !closed || strings.TrimSpace(rest[:nl]) != "json" && strings.TrimSpace(rest[:nl]) != "" {
			return "", nil, false
		}
		t = strings.TrimSpace(inner[nl:])
	}
	var r struct {
		ToolCall  json.RawMessage   `json:"tool_call"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
		Response  json.RawMessage   `json:"response"`
		Content   json.RawMessage   `json:"content"`
	}
	if json.Unmarshal([]byte(t), &r) != nil {
		return "", nil, false
	}
	raws := r.ToolCalls
	if len(r.ToolCall) > 0 && !bytes.Equal(r.ToolCall, []byte("null")) {
		raws = append([]json.RawMessage{r.ToolCall}, raws...)
	}
	var calls []toolCall
	for _, raw := range raws {
		c, ok := parseToolCall(string(raw))
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
	}
	text, ok := jsonText(r.Response)
	if len(calls) > 0 {
		if c, isText := jsonText(r.Content); isText {
			text = c
		}
		return text, calls, true
	}
	return text, nil, ok
}

// jsonText is a "response" value as the answer's text: a string's
// contents, any other value's JSON (a reply held to a response_format).
func jsonText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}
