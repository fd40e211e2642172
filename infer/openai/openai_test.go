package openai

import (
	"encoding/json"
	"errors"
	"io"
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
