package tokenizer

import (
	"bytes"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// TestFromGGUFDefaults checks the settings llama.cpp takes when a file's
// tokenizer keys leave them out, and the keys that override them.
func TestFromGGUFDefaults(t *testing.T) {
	spm := tinySPM(true).Tokens
	bpe := byteVocab().Tokens
	type want struct {
		bos, eos, unk          int32
		addBOS, prefix, rstrip bool // rstrip: of token 2
	}
	tests := []struct {
		name string
		kv   map[string]any
		want want
	}{
		{"sentencepiece without keys", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": spm},
			want{1, 2, 0, true, true, false}},
		{"sentencepiece with Gemma's keys", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": spm,
			"tokenizer.ggml.add_space_prefix": false, "tokenizer.ggml.add_bos_token": false, "tokenizer.ggml.bos_token_id": uint32(2)},
			want{2, 2, 0, false, false, false}},
		{"Phi-3 by name", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": spm, "general.name": "Phi3 mini"},
			want{1, 2, 0, true, true, true}},
		{"llama3 BPE starts with BOS", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.tokens": bpe},
			want{11, 11, NoToken, true, false, false}},
		{"qwen2 BPE does not", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2", "tokenizer.ggml.tokens": bpe},
			want{11, 11, NoToken, false, false, false}},
		{"Gemma 4 always starts with BOS", map[string]any{"tokenizer.ggml.model": "gemma4", "tokenizer.ggml.tokens": spm,
			"tokenizer.ggml.merges": []string{}, "tokenizer.ggml.add_bos_token": false, "tokenizer.ggml.bos_token_id": uint32(1)},
			want{1, NoToken, NoToken, true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := gguf.NewWriter()
			for k, v := range tt.kv {
				w.Set(k, v)
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			tok, err := FromGGUF(f.KV)
			if err != nil {
				t.Fatal(err)
			}
			rstrip := tok.attrs[2]&attrRStrip != 0 // </s> in tinySPM, "#" in byteVocab
			got := want{tok.BOS(), tok.EOS(), tok.UNK(), tok.AddBOS(), tok.addSpacePrefix, rstrip}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
