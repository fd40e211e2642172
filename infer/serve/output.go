package serve

import (
	"encoding/json"
	"strings"
)

// heldSuffix is the length of the longest end of t that begins one of
// marks: text that must wait for the next piece before it can go out.
func heldSuffix(t string, marks []string) int {
	keep := 0
	for _, m := range marks {
		for k := min(len(m)-1, len(t)); k > keep; k-- {
			if strings.HasSuffix(t, m[:k]) {
				keep = k
				break
			}
		}
	}
	return keep
}

// stopMatcher finds the request's stop strings in the streamed text,
// holding back what could be the start of one.
type stopMatcher struct {
	stops   []string
	held    string
	matched string // the stop string found
}

// feed returns the text that may go out and whether a stop string came
// (the text returned is what preceded it; the rest is dropped).
func (m *stopMatcher) feed(s string) (string, bool) {
	t := m.held + s
	m.held = ""
	best := -1
	for _, st := range m.stops {
		if i := strings.Index(t, st); i >= 0 && (best < 0 || i < best) {
			best, m.matched = i, st
		}
	}
	if best >= 0 {
		return t[:best], true
	}
	keep := heldSuffix(t, m.stops)
	m.held = t[len(t)-keep:]
	return t[:len(t)-keep], false
}

// flush returns what was held back (the generation ended without a stop).
func (m *stopMatcher) flush() string {
	t := m.held
	m.held = ""
	return t
}

// Qwen3's tool-call markup (its chat template's).
const (
	toolOpen  = "<tool_call>"
	toolClose = "</tool_call>"
)

// toolCall is a call the model wrote.
type toolCall struct {
	Name      string
	Arguments string // JSON text
	// ID is the call's id where the model wrote one (Mistral Nemo's
	// "id"), else the one the server gave it (chatOut.feed).
	ID string
}

// toolParser takes the calls out of the reply: everything between
// <tool_call> and </tool_call> is a call's JSON, {"name": …, "arguments":
// {…}}; the rest is text.
type toolParser struct {
	inCall bool
	held   string // text that may begin a tag
	body   strings.Builder
}

func (p *toolParser) feed(s string) (text string, calls []toolCall) {
	t := p.held + s
	p.held = ""
	var out strings.Builder
	for t != "" {
		if !p.inCall {
			i := strings.Index(t, toolOpen)
			if i < 0 {
				keep := heldSuffix(t, []string{toolOpen})
				out.WriteString(t[:len(t)-keep])
				p.held = t[len(t)-keep:]
				break
			}
			out.WriteString(t[:i])
			t, p.inCall = t[i+len(toolOpen):], true
			p.body.Reset()
			continue
		}
		i := strings.Index(t, toolClose)
		if i < 0 {
			keep := heldSuffix(t, []string{toolClose})
			p.body.WriteString(t[:len(t)-keep])
			p.held = t[len(t)-keep:]
			break
		}
		p.body.WriteString(t[:i])
		t, p.inCall = t[i+len(toolClose):], false
		if c, ok := parseToolCall(p.body.String()); ok {
			calls = append(calls, c)
		} else {
			out.WriteString(toolOpen + p.body.String() + toolClose)
		}
	}
	return out.String(), calls
}

// flush ends the reply: an unclosed call still counts if its JSON is
// whole, else it goes out as text.
func (p *toolParser) flush() (text string, calls []toolCall) {
	held := p.held
	p.held = ""
	if !p.inCall {
		return held, nil
	}
	p.inCall = false
	body := p.body.String() + held
	if c, ok := parseToolCall(body); ok {
		return "", []toolCall{c}
	}
	return toolOpen + body, nil
}

func parseToolCall(body string) (toolCall, bool) {
	var c struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		// Parameters: Llama 3.x's key for the arguments.
		Parameters json.RawMessage `json:"parameters"`
		// ID: Mistral Nemo writes the call's id beside it.
		ID any `json:"id"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &c); err != nil || c.Name == "" {
		return toolCall{}, false
	}
	if len(c.Arguments) == 0 {
		c.Arguments = c.Parameters
	}
	args := string(c.Arguments)
	var s string
	if json.Unmarshal(c.Arguments, &s) == nil {
		args = s // arguments written as a JSON string holding the JSON
	}
	if args == "" || args == "null" {
		args = "{}"
	}
	id, _ := c.ID.(string)
	return toolCall{Name: c.Name, Arguments: args, ID: id}, true
}
