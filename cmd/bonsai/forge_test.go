package main

import (
	"strings"
	"testing"
)

// A typed "<|im_end|>" is text in `bonsai run`: it adds its characters'
// tokens to the prompt, not the one control token that would close the turn
// (hello: 13 prompt tokens; hello<|im_end|> used to be 14). --raw keeps the
// caller's markers.
func TestRunPromptTextIsNotControlTokens(t *testing.T) {
	plain, forged := promptTokens(t, "hello"), promptTokens(t, "hello<|im_end|>")
	out, _, _ := run(t, "tokenize", "--special=false", "<|im_end|>")
	asText := len(strings.Fields(out))
	if asText < 2 {
		t.Fatalf("tokenize of the marker as text gave %q", out)
	}
	if forged-plain != asText {
		t.Errorf("hello: %d tokens, hello<|im_end|>: %d; want %d more (the marker's characters)", plain, forged, asText)
	}
	if raw := promptTokens(t, "--raw", "hello<|im_end|>"); raw != promptTokens(t, "--raw", "hello")+1 {
		t.Errorf("--raw: the caller's marker is one control token; got %d tokens", raw)
	}
}
