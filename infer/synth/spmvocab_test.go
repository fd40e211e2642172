package synth

import (
	"bytes"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/llamaspm"
)

// spmTokenizer writes v into a GGUF and loads it back as llama.cpp's
// loader would see it.
func spmTokenizer(t *testing.T, v SPMVocab) *tokenizer.Tokenizer {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	SetSPMVocab(w, v)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLlamaSPMVocab(t *testing.T) {
	f, err := gguf.Parse(llamaspm.VocabGGUF)
	if err != nil {
		t.Fatal(err)
	}
	real, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Hello world", " two  spaces", "naïve café 🦙 日本語", "3.14159\n\tx", "<s>[INST] hi [/INST]"}
	for _, tc := range []struct {
		n     int
		exact bool // tokenizes as the real vocabulary does
	}{
		{llamaspm.VocabSize, true},
		{32064, true},
		{1000, false},
		{int(minSPMVocab), false},
	} {
		v, err := LlamaSPMVocab(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		tok := spmTokenizer(t, v)
		if tok.Vocab() != tc.n || tok.BOS() != llamaspm.BOS || tok.EOS() != llamaspm.EOS || !tok.AddBOS() {
			t.Errorf("n=%d: vocab %d, bos %d, eos %d, add_bos %v", tc.n, tok.Vocab(), tok.BOS(), tok.EOS(), tok.AddBOS())
		}
		for _, text := range texts {
			for _, special := range []bool{false, true} {
				ids := tok.Encode(text, special)
				if want := real.Encode(text, special); tc.exact && !slices.Equal(ids, want) {
					t.Errorf("n=%d: Encode(%q, %v) = %v, the real vocabulary gives %v", tc.n, text, special, ids, want)
				}
				if slices.ContainsFunc(ids, func(id int32) bool { return int(id) >= tc.n }) {
					t.Errorf("n=%d: Encode(%q) = %v: an id outside the vocabulary", tc.n, text, ids)
				}
				// With special tokens matched, the space llama.cpp puts after
				// <s> stays in the text.
				if got := tok.Detokenize(ids); !special && got != text {
					t.Errorf("n=%d: Detokenize(Encode(%q, %v)) = %q", tc.n, text, special, got)
				}
			}
		}
	}
	if _, err := LlamaSPMVocab(int(minSPMVocab) - 1); err == nil {
		t.Error("a vocabulary without all byte tokens was accepted")
	}
}

// A Gemma-style vocabulary: no space prefix, turn markers added as control
// tokens.
func TestSPMVocabGemmaStyle(t *testing.T) {
	v, err := LlamaSPMVocab(llamaspm.VocabSize)
	if err != nil {
		t.Fatal(err)
	}
	v.AddSpacePrefix = false
	start := v.Add("<start_of_turn>", 3)
	tok := spmTokenizer(t, v)
	ids := tok.Encode("<start_of_turn>user\nhi", true)
	if ids[0] != start || tok.Piece(ids[1]) != "user" {
		t.Errorf("Encode = %v (%q): want <start_of_turn> then \"user\" without a leading space", ids, tok.Decode(ids))
	}
	if got := tok.Detokenize(ids); got != "<start_of_turn>user\nhi" {
		t.Errorf("Detokenize = %q", got)
	}
}
