package chat

import (
	"strings"
	"testing"
)

func TestSplitThinking(t *testing.T) {
	tests := []struct {
		in, thinking, content string
	}{
		{"<think>\nLet me see.\n</think>\n\nThe answer.", "Let me see.", "The answer."},
		{"<think>\n\n</think>\n\nHello!", "", "Hello!"},
		{"Just an answer.", "", "Just an answer."},
		{"Answer mentioning <think> tags.", "", "Answer mentioning <think> tags."},
		{"prompt opened it\n</think>\n\nok", "prompt opened it", "ok"},
		{"<think>\nunfinished", "unfinished", ""},
		{"\n<think>a</think>b</think>", "a", "b</think>"},
	}
	for _, tt := range tests {
		thinking, content := SplitThinking(tt.in)
		if thinking != tt.thinking || content != tt.content {
			t.Errorf("SplitThinking(%q) = %q, %q; want %q, %q", tt.in, thinking, content, tt.thinking, tt.content)
		}
	}
}

// TestThinkParserChunked feeds the same text in every possible two- and
// one-byte chunking and checks the result does not depend on it.
func TestThinkParserChunked(t *testing.T) {
	const text = "<think>\nStep one.\n\nStep two.\n</think>\n\nDone <th"
	wantThinking, wantContent := "Step one.\n\nStep two.", "Done <th"
	for size := 1; size <= len(text); size++ {
		p := NewThinkParser(false)
		var segs []Segment
		for i := 0; i < len(text); i += size {
			segs = append(segs, p.Feed(text[i:min(i+size, len(text))])...)
		}
		segs = append(segs, p.Flush()...)
		var tb, cb strings.Builder
		for _, s := range segs {
			if s.Text == "" {
				t.Errorf("size %d: empty segment", size)
			}
			if s.Thinking {
				tb.WriteString(s.Text)
			} else {
				cb.WriteString(s.Text)
			}
		}
		if tb.String() != wantThinking || cb.String() != wantContent {
			t.Errorf("chunk size %d: thinking %q content %q", size, tb.String(), cb.String())
		}
	}
}

func TestThinkParserState(t *testing.T) {
	p := NewThinkParser(false)
	p.Feed("<think>")
	if !p.Thinking() {
		t.Errorf("not thinking after <think>")
	}
	segs := p.Feed("\nabc")
	if len(segs) != 1 || segs[0].Text != "abc" || !segs[0].Thinking {
		t.Errorf("segments %+v", segs)
	}
	p.Feed("</think>")
	if p.Thinking() {
		t.Errorf("still thinking after </think>")
	}
}
