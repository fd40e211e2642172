package serve

import "testing"

// The text is fed in two pieces cut at every position: a stop string or a
// tag cut anywhere is still found.
func TestStopMatcherAnySplit(t *testing.T) {
	for _, c := range []struct {
		text  string
		stops []string
		want  string
		hit   bool
	}{
		{"hello world", []string{"wor"}, "hello ", true},
		{"hello world", []string{"xyz"}, "hello world", false},
		{"aaab", []string{"aab"}, "a", true},
		{"one two", []string{"two", "one t"}, "", true},
		{"ends with sto", []string{"stop"}, "ends with sto", false},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			m := stopMatcher{stops: c.stops}
			a, hit := m.feed(c.text[:cut])
			out := a
			if !hit {
				var b string
				b, hit = m.feed(c.text[cut:])
				out += b
				if !hit {
					out += m.flush()
				}
			}
			if out != c.want || hit != c.hit {
				t.Errorf("%q cut at %d, stops %q: %q (hit %v), want %q (hit %v)", c.text, cut, c.stops, out, hit, c.want, c.hit)
			}
		}
	}
}

func TestToolParserAnySplit(t *testing.T) {
	for _, c := range []struct {
		text  string
		want  string
		calls []toolCall
	}{
		{"plain text", "plain text", nil},
		{"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", []toolCall{{"f", `{"a": 1}`, ""}}},
		{"Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\":2}\"}\n</tool_call>\n<tool_call>{\"name\":\"g\"}</tool_call>",
			"Sure.\n\n", []toolCall{{"f", `{"x":2}`, ""}, {"g", "{}", ""}}},
		{"<tool_call>not json</tool_call> after", "<tool_call>not json</tool_call> after", nil},
		{"<tool_call>{\"name\": \"cut\", \"arguments\": {}}", "", []toolCall{{"cut", "{}", ""}}}, // unclosed but whole
		{"<tool_call>{\"name\": \"cu", "<tool_call>{\"name\": \"cu", nil},
		{"a <tool_ca", "a <tool_ca", nil},
	} {
		for cut := 0; cut <= len(c.text); cut++ {
			var p toolParser
			a, calls := p.feed(c.text[:cut])
			b, more := p.feed(c.text[cut:])
			d, last := p.flush()
			calls = append(append(calls, more...), last...)
			if got := a + b + d; got != c.want || !sameCalls(calls, c.calls) {
				t.Errorf("%q cut at %d: text %q calls %v, want %q %v", c.text, cut, got, calls, c.want, c.calls)
			}
		}
	}
}

func sameCalls(a, b []toolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPythonSpacing(t *testing.T) {
	got := pythonSpacing([]byte(`{"a":[1,2],"b":"x, y: z\"q,"}`))
	if want := `{"a": [1, 2], "b": "x, y: z\"q,"}`; got != want {
		t.Errorf("%s, want %s", got, want)
	}
	if toolsBlock(nil) != "" {
		t.Error("a tools block without tools")
	}
}
