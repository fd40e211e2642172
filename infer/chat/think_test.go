package chat

import (
	"strings"
	"testing"
)

// TestSplitThinkingTags: Mistral's markers split as <think>'s do, and each
// family's markers are text to the other's parser.
func TestSplitThinkingTags(t *testing.T) {
	tests := []struct {
		tags                  ThinkTags
		in, thinking, content string
	}{
		{MistralThinkTags, "[THINK]Let me see.[/THINK]The answer.", "Let me see.", "The answer."},
		{MistralThinkTags, "[THINK]\nsteps\n[/THINK]\n\nok", "steps", "ok"},
		{MistralThinkTags, "Just an answer.", "", "Just an answer."},
		{MistralThinkTags, "opened by the prompt[/THINK]ok", "opened by the prompt", "ok"},
		{MistralThinkTags, "[THINK]unfinished", "unfinished", ""},
		{MistralThinkTags, "<think>a</think>b", "", "<think>a</think>b"},
		{DefaultThinkTags, "[THINK]a[/THINK]b", "", "[THINK]a[/THINK]b"},
		{DefaultThinkTags, "<think>a</think>b", "a", "b"},
	}
	for _, tt := range tests {
		thinking, content := SplitThinkingTags(tt.tags, tt.in)
		if thinking != tt.thinking || content != tt.content {
			t.Errorf("SplitThinkingTags(%q, %q) = %q, %q; want %q, %q", tt.tags.Open, tt.in, thinking, content, tt.thinking, tt.content)
		}
	}
}

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
	for _, c := range []struct {
		tags                      ThinkTags
		text                      string
		wantThinking, wantContent string
	}{
		{DefaultThinkTags, "<think>\nStep one.\n\nStep two.\n</think>\n\nDone <th", "Step one.\n\nStep two.", "Done <th"},
		{MistralThinkTags, "[THINK]\nStep one.\n\nStep two.\n[/THINK]\n\nDone [TH", "Step one.\n\nStep two.", "Done [TH"},
	} {
		thinkParserChunked(t, c.tags, c.text, c.wantThinking, c.wantContent)
	}
}

func thinkParserChunked(t *testing.T, tags ThinkTags, text, wantThinking, wantContent string) {
	t.Helper()
	for size := 1; size <= len(text); size++ {
		p := NewThinkParserTags(tags, false)
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
			t.Errorf("%s chunk size %d: thinking %q content %q", tags.Open, size, tb.String(), cb.String())
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
