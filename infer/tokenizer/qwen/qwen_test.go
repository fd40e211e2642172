package qwen

import (
	"bytes"
	"testing"
)

func TestVocabEmbedded(t *testing.T) {
	if !bytes.HasPrefix(VocabGGUF, []byte("GGUF")) {
		t.Fatalf("VocabGGUF does not start with the GGUF magic")
	}
	if len(VocabGGUF) < 5_000_000 {
		t.Fatalf("VocabGGUF is %d bytes, want the full ~5.9 MB vocab", len(VocabGGUF))
	}
}

func TestAddedTokens(t *testing.T) {
	if len(AddedTokens) != 23 {
		t.Fatalf("got %d added tokens, want 23", len(AddedTokens))
	}
	for i, tok := range AddedTokens {
		if want := int32(151646 + i); tok.ID != want {
			t.Errorf("AddedTokens[%d].ID = %d, want %d", i, tok.ID, want)
		}
	}
	if AddedTokens[ThinkStart-151646].Text != "<think>" || AddedTokens[ThinkEnd-151646].Text != "</think>" {
		t.Errorf("think ids do not point at <think>/</think>")
	}
}

func TestQwen3Overlay(t *testing.T) {
	tokens := make([]string, VocabSize)
	types := make([]int32, VocabSize)
	gotTokens, gotTypes := Qwen3(tokens, types)
	if gotTokens[151667] != "<think>" || gotTypes[151667] != TypeUserDefined {
		t.Errorf("151667 = %q/%d", gotTokens[151667], gotTypes[151667])
	}
	if gotTypes[151650] != TypeControl {
		t.Errorf("151650 type = %d, want control", gotTypes[151650])
	}
	if tokens[151667] != "" {
		t.Errorf("input slice was modified")
	}
}

func TestQwen3Vocab(t *testing.T) {
	v, err := Qwen3Vocab()
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "gpt2" || v.Pre != "qwen2" {
		t.Errorf("model/pre = %q/%q", v.Model, v.Pre)
	}
	if v.Tokens[IMEnd] != "<|im_end|>" || v.Types[IMEnd] != TypeControl {
		t.Errorf("im_end = %q type %d", v.Tokens[IMEnd], v.Types[IMEnd])
	}
	if v.Tokens[ThinkEnd] != "</think>" || v.Tokens[151669] != "[PAD151669]" {
		t.Errorf("overlay: %q %q", v.Tokens[ThinkEnd], v.Tokens[151669])
	}
	if len(v.Merges) != 151387 {
		t.Errorf("%d merges, want 151387", len(v.Merges))
	}
}
