package serve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// Converting messages costs time linear in them: 50,000 tool results (or
// tool calls) took 20 s (71 s) joined with +=; now well under a second.
func TestConvertMessagesLinear(t *testing.T) {
	const n = 50_000
	results := []openai.Message{{Role: "user", Content: "x"}}
	calls := openai.Message{Role: "assistant"}
	for range n {
		results = append(results, openai.Message{Role: "tool", Content: openai.Content(strings.Repeat("r", 20))})
		calls.ToolCalls = append(calls.ToolCalls, openai.ToolCall{Function: openai.FunctionCall{Name: "f", Arguments: `{"a": 1}`}})
	}
	for name, msgs := range map[string][]openai.Message{"tool results": results, "tool calls": {{Role: "user", Content: "x"}, calls}} {
		start := time.Now()
		out, aerr := convertMessages(msgs, nil, "")
		if aerr != nil {
			t.Fatal(aerr)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%d %s: %s", n, name, took)
		}
		if got := strings.Count(out[len(out)-1].Content, "\n"); got < 2*n {
			t.Errorf("%s: %d lines", name, got)
		}
	}
}

func TestCleanID(t *testing.T) {
	for in, want := range map[string]string{
		"(embedded) bonsai-tiny": "bonsai-tiny",
		"bonsai-1.7b":            "bonsai-1.7b",
		"Qwen3 8B (Q4_K_M)":      "Qwen3-8B",
		"my model!":              "my-model",
		"org/name:tag":           "org/name:tag",
		"(only a note)":          "",
	} {
		if got := cleanID(in); got != want {
			t.Errorf("cleanID(%q) = %q, want %q", in, got, want)
		}
	}
}

// At most Options.Tokenizers requests tokenize at once (three 8 MB
// requests tokenizing together peaked at 3.56 GB); the others wait, and
// give up when their client does.
func TestTokenizingBounded(t *testing.T) {
	s := New(Options{Tokenizers: 2})
	bg := context.Background()
	release1, aerr1 := s.tokenizing(bg)
	_, aerr2 := s.tokenizing(bg)
	if aerr1 != nil || aerr2 != nil {
		t.Fatal(aerr1, aerr2)
	}
	gone, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	if _, aerr := s.tokenizing(gone); aerr == nil {
		t.Fatal("a third request tokenizes beside two")
	}
	release1()
	if _, aerr := s.tokenizing(bg); aerr != nil {
		t.Fatal(aerr)
	}
}
