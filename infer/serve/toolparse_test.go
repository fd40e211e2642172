package serve

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// parseAll feeds text to p cut at cut and flushes: the text out and the
// calls.
func parseAll(p callParser, text string, cut int) (string, []toolCall) {
	a, calls := p.feed(text[:cut])
	b, more := p.feed(text[cut:])
	d, last := p.flush()
	return a + b + d, append(append(calls, more...), last...)
}

// The generic format's replies, as Gemma 3 writes them when told to answer
// in JSON: calls, an answer in "response", fenced JSON, and text that is
// not the format; cut anywhere.
func TestGenericParserAnySplit(t *testing.T) {
	for _, c := range []struct {
		text  string
		want  string
		calls []toolCall
	}{
		{"Hello there", "Hello there", nil},
		{`{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}`, "",
			[]toolCall{{"get_weather", `{"city": "Paris"}`, ""}}},
		{"```json\n{\n  \"tool_call\": {\n    \"name\": \"f\",\n    \"arguments\": {}\n  }\n}\n```", "", []toolCall{{"f", "{}", ""}}},
		{`{"tool_calls": [{"name": "f", "arguments": {"a": 1}, "id": "c1"}, {"name": "g", "arguments": {}}]}`, "",
			[]toolCall{{"f", `{"a": 1}`, "c1"}, {"g", "{}", ""}}},
		{`{"response": "It is \"sunny\"."}`, `It is "sunny".`, nil},
		{`  {"response": {"temp": 21}}`, `{"temp": 21}`, nil},
		{`{"tool_calls": [{"name": "f", "arguments": {}}], "content": "Looking."}`, "Looking.", []toolCall{{"f", "{}", ""}}},
		{`{"temp": 21}`, `{"temp": 21}`, nil},                                           // JSON, not the format
		{`{"tool_call": {"name": "f", "argu`, `{"tool_call": {"name": "f", "argu`, nil}, // cut short
		{`{"tool_calls": [{"name": "f"}, {"arguments": {}}]}`, `{"tool_calls": [{"name": "f"}, {"arguments": {}}]}`, nil},
		{"``` not json", "``` not json", nil},
		{"`code` first", "`code` first", nil},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			got, calls := parseAll(&genericParser{}, c.text, cut)
			if got != c.want || !sameCalls(calls, c.calls) {
				t.Fatalf("%q cut at %d: text %q, calls %v; want %q, %v", c.text, cut, got, calls, c.want, c.calls)
			}
		}
	}
}

// Mistral Nemo writes the call's id beside it: the call keeps it.
func TestMistralCallKeepsItsID(t *testing.T) {
	text := `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "a1B2c3D4e"}]`
	got, calls := parseAll(mistralTools.parser(), text, 5)
	if got != "" || !sameCalls(calls, []toolCall{{"f", `{"a": 1}`, "a1B2c3D4e"}}) {
		t.Errorf("text %q, calls %v", got, calls)
	}
}

// Mistral's ids are 9 letters and digits, new or mapped from another
// server's; the same id always maps alike, so a call and its result match.
func TestMistralIDs(t *testing.T) {
	alnum9 := func(s string) bool { return len(s) == 9 && strings.Trim(s, alnum) == "" }
	for range 20 {
		if id := mistralTools.callID(); !alnum9(id) {
			t.Fatalf("new id %q", id)
		}
	}
	if id := hermesTools.callID(); !strings.HasPrefix(id, "call_") {
		t.Errorf("hermes id %q", id)
	}
	for _, id := range []string{"call_0123456789abcdef", "toolu_x", "", "abc"} {
		m := mistralID(id)
		if !alnum9(m) || mistralID(id) != m {
			t.Errorf("%q maps to %q", id, m)
		}
	}
	if mistralID("a1B2c3D4e") != "a1B2c3D4e" {
		t.Error("a Mistral id was changed")
	}
	if mistralID("call_1") == mistralID("call_2") {
		t.Error("two ids map alike")
	}
}

// A hostile or degenerate reply (a megabyte of blank lines, of "{", of
// tag openings), fed a byte at a time as a stream of one-byte tokens
// would be, costs each parser time linear in its length: a parser that
// rescans what it holds at every step takes minutes here.
func TestParsersLinearOnHostileReplies(t *testing.T) {
	const n = 1 << 20
	for _, text := range []string{
		strings.Repeat("\n", n),
		strings.Repeat("{", n),
		strings.Repeat("<tool_call>", n/11),
		"<tool_call>" + strings.Repeat("</tool_cal", n/10),
		"[TOOL_CALLS]" + strings.Repeat("[", n),
		strings.Repeat("[TOOL_CALLS]f[ARGS]{}", n/20),
		"```json\n" + strings.Repeat(" ", n),
	} {
		for _, f := range []toolFormat{hermesTools, llama3Tools, mistralTools, mistralArgsTools, genericTools} {
			p := f.parser()
			start := time.Now()
			for i := range len(text) {
				p.feed(text[i : i+1])
			}
			p.flush()
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("format %d, %q…: %v for %d bytes", f, text[:12], d, len(text))
			}
		}
	}
}

// fuzzParser checks a parser on any reply cut anywhere: it never panics,
// the cut does not change what comes out, every call has a name and JSON
// arguments, and a reply with no call comes out as it went in.
func fuzzParser(t *testing.T, f toolFormat, text string, cut int) {
	if len(text) > 1<<16 {
		return
	}
	cut = min(max(cut, 0), len(text))
	whole, wholeCalls := parseAll(f.parser(), text, len(text))
	got, calls := parseAll(f.parser(), text, cut)
	if got != whole || !sameCalls(calls, wholeCalls) {
		t.Fatalf("%q cut at %d: %q %v; whole: %q %v", text, cut, got, calls, whole, wholeCalls)
	}
	for _, c := range calls {
		if c.Name == "" || !json.Valid([]byte(c.Arguments)) {
			t.Fatalf("%q: call %+v", text, c)
		}
	}
	if len(calls) == 0 && f != genericTools && got != text {
		t.Fatalf("%q with no call came out as %q", text, got)
	}
}

func FuzzHermesParser(f *testing.F) {
	f.Add("Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", 9)
	f.Add("<tool_call>{\"name\": \"g\"}</tool_call><tool_call>x</tool_call>", 3)
	f.Fuzz(func(t *testing.T, text string, cut int) { fuzzParser(t, hermesTools, text, cut) })
}

func FuzzLlama3Parser(f *testing.F) {
	f.Add(`<|python_tag|>{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}`, 4)
	f.Add(`{"name": "f", "parameters": {}}`, 0)
	f.Fuzz(func(t *testing.T, text string, cut int) { fuzzParser(t, llama3Tools, text, cut) })
}

func FuzzMistralParser(f *testing.F) {
	f.Add(`[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}]`, 7)
	f.Add(`[1, 2] are numbers`, 1)
	f.Fuzz(func(t *testing.T, text string, cut int) { fuzzParser(t, mistralTools, text, cut) })
}

func FuzzGenericParser(f *testing.F) {
	f.Add(`{"tool_call": {"name": "f", "arguments": {"a": 1}}}`, 5)
	f.Add("```json\n{\"response\": \"hi\"}\n```", 3)
	f.Add(`{"tool_calls": [{"name": "f", "arguments": {}}], "content": "x"}`, 20)
	f.Fuzz(func(t *testing.T, text string, cut int) { fuzzParser(t, genericTools, text, cut) })
}

// The v11 tokenizer's calls (Mistral Small 3.2, Magistral, Ministral 3):
// text, then [TOOL_CALLS]name[ARGS]{…} for each call, an id optional.
func TestArgsCallParserAnySplit(t *testing.T) {
	for _, c := range []struct {
		text  string
		want  string
		calls []toolCall
	}{
		{"Hello there", "Hello there", nil},
		{`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`, "", []toolCall{{"get_weather", `{"city": "Paris"}`, ""}}},
		{`Let me look.[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]a1B2c3D4e[ARGS]{}`, "Let me look.",
			[]toolCall{{"f", `{"a": 1}`, ""}, {"g", "{}", "a1B2c3D4e"}}},
		{`[TOOL_CALLS]f[ARGS]{"a": `, `[TOOL_CALLS]f[ARGS]{"a": `, nil}, // cut short
		{`[TOOL_CALLS]f{"a": 1}`, `[TOOL_CALLS]f{"a": 1}`, nil},         // no [ARGS]
		{`[TOOL_CALLS]f[ARGS][1]`, `[TOOL_CALLS]f[ARGS][1]`, nil},       // arguments not an object
		{"a [TOOL_CA", "a [TOOL_CA", nil},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			got, calls := parseAll(mistralArgsTools.parser(), c.text, cut)
			if got != c.want || !sameCalls(calls, c.calls) {
				t.Fatalf("%q cut at %d: text %q, calls %v; want %q, %v", c.text, cut, got, calls, c.want, c.calls)
			}
		}
	}
}

// With several tools, a v11 required call's arguments follow the schema of
// the tool its markup names.
func TestArgsCallMachineTiesArgumentsToName(t *testing.T) {
	tools := []openai.Tool{
		{Type: "function", Function: openai.ToolFunction{Name: "f", Parameters: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}`)}},
		{Type: "function", Function: openai.ToolFunction{Name: "g", Parameters: json.RawMessage(`{"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}`)}},
	}
	for _, c := range []struct {
		forced, text string
		ok           bool
	}{
		{"", `[TOOL_CALLS]f[ARGS]{"a": 1}`, true},
		{"", `[TOOL_CALLS]g[ARGS]{"b": "x"}`, true},
		{"", `[TOOL_CALLS]g[ARGS]{"a": 1}`, false},
		{"", `[TOOL_CALLS]f[ARGS]{"b": "x"}`, false},
		{"g", `[TOOL_CALLS]f[ARGS]{"a": 1}`, false},
		{"g", `[TOOL_CALLS]g[ARGS]{"b": "x"}`, true},
	} {
		m, aerr := toolMachine(tools, c.forced, mistralArgsTools)
		if aerr != nil {
			t.Fatal(aerr.msg)
		}
		if got := m.Feed(c.text) && m.CanEnd(); got != c.ok {
			t.Errorf("forced %q, %q: accepted %v, want %v", c.forced, c.text, got, c.ok)
		}
	}
}

func FuzzMistralArgsParser(f *testing.F) {
	f.Add(`Text[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]abcdefghi[ARGS]{}`, 7)
	f.Add(`[TOOL_CALLS]f[ARGS]{`, 1)
	f.Fuzz(func(t *testing.T, text string, cut int) { fuzzParser(t, mistralArgsTools, text, cut) })
}
