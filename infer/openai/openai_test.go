package openai

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestContentAndStrings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Content
		err  bool
	}{
		{`"hi"`, "hi", false},
		{`null`, "", false},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab", false},
		{`[{"type":"image_url","image_url":{"url":"x"}}]`, "", true},
		{`42`, "", true},
	} {
		var got Content
		err := json.Unmarshal([]byte(c.in), &got)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("content %s: %q, %v", c.in, got, err)
		}
	}
	var s Strings
	if err := json.Unmarshal([]byte(`"x"`), &s); err != nil || len(s) != 1 || s[0] != "x" {
		t.Errorf("stop string: %v %v", s, err)
	}
	if err := json.Unmarshal([]byte(`["a","b"]`), &s); err != nil || len(s) != 2 {
		t.Errorf("stop list: %v %v", s, err)
	}
	if err := json.Unmarshal([]byte(`{"a":1}`), &s); err == nil {
		t.Error("a stop object was accepted")
	}
}

func TestEventReader(t *testing.T) {
	stream := ": ping\n\nevent: message\nid: 3\ndata: {\"a\":1}\n\ndata: line1\ndata: line2\n\n\n\ndata:[DONE]\n\ndata: tail"
	r := NewEventReader(strings.NewReader(stream))
	for _, want := range []string{`{"a":1}`, "line1\nline2", "[DONE]", "tail"} {
		got, err := r.Next()
		if err != nil || got != want {
			t.Fatalf("%q, %v; want %q", got, err, want)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %v", err)
	}
	long := NewEventReader(strings.NewReader("data: " + strings.Repeat("x", maxEventLine+1) + "\n\n"))
	if _, err := long.Next(); !errors.Is(err, ErrEventTooLong) {
		t.Errorf("an endless line: %v", err)
	}
}

func FuzzChatRequest(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stop":"x","tools":[{"type":"function","function":{"name":"f"}}]}`)
	f.Add(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}],"stop":["a"]}`)
	f.Fuzz(func(t *testing.T, body string) {
		var r ChatRequest
		if json.Unmarshal([]byte(body), &r) != nil {
			return
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("a decoded request does not encode: %v", err)
		}
	})
}

func FuzzEventReader(f *testing.F) {
	f.Add("data: a\n\n: c\ndata: b\ndata: c\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		r := NewEventReader(strings.NewReader(stream))
		for range len(stream) + 1 {
			data, err := r.Next()
			if err != nil {
				return
			}
			if !strings.Contains(stream, strings.Split(data, "\n")[0]) {
				t.Fatalf("event %q is not in the stream", data)
			}
		}
		t.Fatal("more events than bytes")
	})
}

// /v1/completions' prompt in each of its wire forms.
func TestPromptsForms(t *testing.T) {
	for _, c := range []struct {
		wire string
		want Prompts
		bad  bool
	}{
		{`"hi"`, Prompts{{Text: "hi"}}, false},
		{`["a","b"]`, Prompts{{Text: "a"}, {Text: "b"}}, false},
		{`[1,2,3]`, Prompts{{Tokens: []int32{1, 2, 3}}}, false},
		{`[[1,2],[3]]`, Prompts{{Tokens: []int32{1, 2}}, {Tokens: []int32{3}}}, false},
		{`null`, nil, false},
		{`[1,"a"]`, nil, true},
		{`[1.5]`, nil, true},
		{`{"a":1}`, nil, true},
		{`[[1],"a"]`, Prompts{{Tokens: []int32{1}}, {Text: "a"}}, false},
	} {
		var p Prompts
		err := json.Unmarshal([]byte(c.wire), &p)
		if (err != nil) != c.bad || !c.bad && !reflect.DeepEqual(p, c.want) {
			t.Errorf("%s: %+v, %v", c.wire, p, err)
		}
	}
}

func FuzzPrompts(f *testing.F) {
	for _, s := range []string{`"hi"`, `["a","b"]`, `[1,2]`, `[[1],[2,3]]`, `[1,"a"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Prompts
		if json.Unmarshal(b, &p) != nil {
			return
		}
		for _, one := range p {
			if one.Text != "" && one.Tokens != nil {
				t.Fatalf("%s: a prompt of text and tokens", b)
			}
		}
	})
}
