package serve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/openai"
)

// Each family's template picks its call format, as llama.cpp's parsers
// are picked from what the template mentions.
func TestToolFormatOfTemplates(t *testing.T) {
	for _, c := range []struct {
		file string
		want toolFormat
	}{
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", llama3Tools},
		{"meta-llama-Llama-3.2-3B-Instruct.jinja", llama3Tools},
		{"meta-llama-Llama-3.3-70B-Instruct.jinja", llama3Tools},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", mistralTools},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", mistralArgsTools},
		{"mistralai-Ministral-3-14B-Reasoning-2512.jinja", mistralArgsTools},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", hermesTools},
		{"Qwen-Qwen3-0.6B.jinja", hermesTools},
		{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", hermesTools},
		// Templates that write no tools: the generic JSON format.
		{"meta-llama-Llama-2-7b-chat.jinja", genericTools},
		{"google-gemma-3-it.jinja", genericTools},
		{"google-gemma-2-2b-it.jinja", genericTools},
		{"mistralai-Mistral-7B-Instruct-v0.2.jinja", genericTools},
		{"microsoft-Phi-3.5-mini-instruct.jinja", genericTools},
	} {
		src, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "templates", c.file))
		if err != nil {
			t.Fatal(err)
		}
		tmpl := chat.FromSource(string(src))
		if !tmpl.Recognized {
			sp := chat.Specials{BOS: "<s>", EOS: "</s>", Markers: []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<start_of_turn>", "<end_of_turn>"}}
			if tmpl, err = chat.FromJinja(string(src), sp); err != nil {
				t.Fatalf("%s: %v", c.file, err)
			}
		}
		if got := toolFormatOf(tmpl); got != c.want {
			t.Errorf("%s: format %d, want %d", c.file, got, c.want)
		}
	}
}

// The JSON families' calls are found whichever way the reply is cut into
// pieces; a reply that is not a call streams as text.
func TestJSONCallParserAnySplit(t *testing.T) {
	for _, c := range []struct {
		marker string
		text   string
		want   string
		calls  []toolCall
	}{
		{pythonTag, "Hello there", "Hello there", nil},
		{pythonTag, `{"name": "f", "parameters": {"a": 1}}`, "", []toolCall{{"f", `{"a": 1}`, ""}}},
		{pythonTag, "\n" + `<|python_tag|>{"name": "f", "parameters": {}}`, "", []toolCall{{"f", "{}", ""}}},
		{pythonTag, `{"name": "f", "parameters": {"a": 1}}; {"name": "g", "arguments": {"b": "x"}}`, "",
			[]toolCall{{"f", `{"a": 1}`, ""}, {"g", `{"b": "x"}`, ""}}},
		{pythonTag, `{"a": 1}`, `{"a": 1}`, nil},                         // JSON, but no call
		{pythonTag, `{"name": "f", "param`, `{"name": "f", "param`, nil}, // cut short
		{pythonTag, "<|py", "<|py", nil},
		{mistralTC, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]`, "",
			[]toolCall{{"f", `{"a": 1}`, ""}, {"g", "{}", ""}}},
		{mistralTC, "[1, 2] are numbers", "[1, 2] are numbers", nil},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			p := &jsonCallParser{marker: c.marker}
			a, calls := p.feed(c.text[:cut])
			b, more := p.feed(c.text[cut:])
			d, last := p.flush()
			calls = append(append(calls, more...), last...)
			if got := a + b + d; got != c.want || !sameCalls(calls, c.calls) {
				t.Fatalf("%q cut at %d: text %q, calls %v; want %q, %v", c.text, cut, got, calls, c.want, c.calls)
			}
		}
	}
}

func FuzzJSONCalls(f *testing.F) {
	f.Add(`{"name": "f", "parameters": {"a": 1}}; {"name": "g"}`)
	f.Add(`[{"name": "f", "arguments": {}}]`)
	f.Fuzz(func(t *testing.T, s string) {
		calls, ok := parseJSONCalls(s)
		if ok != (len(calls) > 0) {
			t.Fatalf("%q: ok %v with %d calls", s, ok, len(calls))
		}
		for _, c := range calls {
			if c.Name == "" {
				t.Fatalf("%q: a call without a name", s)
			}
		}
	})
}

// A required call is held to the family's markup and key, and the text
// the machine accepts is what the family's parser takes as the call.
func TestToolMachinePerFamily(t *testing.T) {
	tools := []openai.Tool{{Type: "function", Function: openai.ToolFunction{Name: "f",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}`)}}}
	for _, c := range []struct {
		f    toolFormat
		text string
		ok   bool
	}{
		{llama3Tools, `{"name": "f", "parameters": {"a": 1}}`, true},
		{llama3Tools, `{"name": "f", "arguments": {"a": 1}}`, false},
		{llama3Tools, `{"name": "g", "parameters": {"a": 1}}`, false},
		{llama3Tools, `{"name": "f", "parameters": {"a": "x"}}`, false},
		{mistralTools, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "a1B2c3D4e"}]`, true},
		{mistralTools, `[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}, "id": "a1B2c3D4e"}]`, true}, // SentencePiece's space
		{mistralTools, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]`, false},
		{mistralTools, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "call_1"}]`, false},
		{mistralTools, `[TOOL_CALLS][]`, false},
		{mistralTools, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "a1B2c3D4e"}, {"name": "f", "arguments": {"a": 1}, "id": "a1B2c3D4e"}]`, false},
		{mistralTools, `{"name": "f", "arguments": {"a": 1}}`, false},
		{mistralArgsTools, `[TOOL_CALLS]f[ARGS]{"a": 1}`, true},
		{mistralArgsTools, `[TOOL_CALLS]g[ARGS]{"a": 1}`, false},
		{mistralArgsTools, `[TOOL_CALLS]f[ARGS]{"a": "x"}`, false},
		{mistralArgsTools, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}]`, false},
		{hermesTools, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", true},
		{hermesTools, `{"name": "f", "arguments": {"a": 1}}`, false},
		{genericTools, `{"tool_call": {"name": "f", "arguments": {"a": 1}}}`, true},
		{genericTools, `{"tool_call": {"name": "f", "arguments": {"a": "x"}}}`, false},
		{genericTools, `{"response": "hi"}`, false},
		{genericTools, `{"name": "f", "arguments": {"a": 1}}`, false},
	} {
		m, aerr := toolMachine(tools, "", c.f)
		if aerr != nil {
			t.Fatal(aerr.msg)
		}
		if got := m.Feed(c.text) && m.CanEnd(); got != c.ok {
			t.Errorf("format %d, %q: accepted %v, want %v", c.f, c.text, got, c.ok)
		}
		if !c.ok {
			continue
		}
		p := c.f.parser()
		text, calls := p.feed(c.text)
		rest, more := p.flush()
		calls = append(calls, more...)
		if text+rest != "" || len(calls) != 1 || calls[0].Name != "f" || calls[0].Arguments != `{"a": 1}` {
			t.Errorf("format %d, %q: text %q, calls %v", c.f, c.text, text+rest, calls)
		}
	}
}
