package gguf

import (
	"os"
	"path/filepath"
	"testing"
)

// vocabPath is the real Qwen2 vocab GGUF from llama.cpp's tests, kept in the
// tokenizer's package.
var vocabPath = filepath.Join("..", "infer", "tokenizer", "qwen", "ggml-vocab-qwen2.gguf")

// TestRealVocabFile checks the header facts of llama.cpp's
// ggml-vocab-qwen2.gguf through Open's mapping.
func TestRealVocabFile(t *testing.T) {
	if _, err := os.Stat(vocabPath); err != nil {
		t.Fatalf("vocab fixture missing (it is part of the repository): %v", err)
	}
	f, err := Open(vocabPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 32 || len(f.Tensors) != 0 || f.KV.Len() != 20 {
		t.Errorf("version %d alignment %d tensors %d keys %d", f.Version, f.Alignment, len(f.Tensors), f.KV.Len())
	}
	strs := map[string]string{
		"general.architecture": "qwen2",
		"tokenizer.ggml.model": "gpt2",
		"tokenizer.ggml.pre":   "qwen2",
	}
	for k, want := range strs {
		if got, ok := f.KV.String(k); !ok || got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	uints := map[string]uint64{
		"tokenizer.ggml.bos_token_id":     151643,
		"tokenizer.ggml.eos_token_id":     151643,
		"tokenizer.ggml.padding_token_id": 151643,
		"qwen2.context_length":            32768,
		"qwen2.block_count":               32,
	}
	for k, want := range uints {
		if got, ok := f.KV.Uint(k); !ok || got != want {
			t.Errorf("%s = %d, want %d", k, got, want)
		}
	}
	if eps, ok := f.KV.Float("qwen2.attention.layer_norm_rms_epsilon"); !ok || float32(eps) != 1e-6 {
		t.Errorf("rms epsilon %g", eps)
	}
	tokens, ok := f.KV.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) != 151936 {
		t.Fatalf("%d tokens", len(tokens))
	}
	want := map[int]string{0: "!", 151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>", 151935: "[PAD151935]"}
	for id, s := range want {
		if tokens[id] != s {
			t.Errorf("token %d = %q, want %q", id, tokens[id], s)
		}
	}
	types, ok := f.KV.Int32s("tokenizer.ggml.token_type")
	if !ok || len(types) != 151936 || types[0] != 1 || types[151643] != 3 || types[151645] != 3 || types[151646] != 4 {
		t.Errorf("token types: %d entries", len(types))
	}
	merges, ok := f.KV.Strings("tokenizer.ggml.merges")
	if !ok || len(merges) != 151387 || merges[0] != "Ġ Ġ" {
		t.Errorf("merges: %d, first %q", len(merges), merges[:min(1, len(merges))])
	}
	if tmpl, _ := f.KV.String("tokenizer.chat_template"); len(tmpl) == 0 {
		t.Error("no chat template")
	}
}

// TestRewriteRealVocab copies every key of the real file through the
// Writer and reads it back unchanged.
func TestRewriteRealVocab(t *testing.T) {
	data, err := os.ReadFile(vocabPath)
	if err != nil {
		t.Fatalf("vocab fixture missing (it is part of the repository): %v", err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter()
	for _, k := range f.KV.Keys() {
		v, _ := f.KV.Get(k)
		w.Set(k, v)
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// No tensors, so no data padding: the bytes are identical.
	if len(again) != len(data) || string(again) != string(data) {
		t.Errorf("rewritten file differs: %d bytes vs %d", len(again), len(data))
	}
}

func BenchmarkOpenRealVocab(b *testing.B) {
	if _, err := os.Stat(vocabPath); err != nil {
		b.Fatalf("vocab fixture missing (it is part of the repository): %v", err)
	}
	for b.Loop() {
		f, err := Open(vocabPath)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
