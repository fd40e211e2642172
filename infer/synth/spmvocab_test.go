package synth

import (
	"bytes"
	"crypto/sha256"
	"maps"
	"path/filepath"
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

// A synthetic model keeps its weights when its tokenizer is replaced.
func TestReplaceVocab(t *testing.T) {
	o := small(gguf.Q8_0)
	o.Shape.Vocab = 1000
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := Write(path, o); err != nil {
		t.Fatal(err)
	}
	before := tensorHashes(t, path)
	v, err := LlamaSPMVocab(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ReplaceVocab(path, v); err != nil {
		t.Fatal(err)
	}
	if after := tensorHashes(t, path); !maps.Equal(before, after) {
		t.Error("the tensors changed")
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, _ := f.KV.String("tokenizer.ggml.model"); m != "llama" {
		t.Errorf("tokenizer.ggml.model = %q", m)
	}
	if _, ok := f.KV.Get("tokenizer.chat_template"); ok {
		t.Error("Qwen's chat template stayed")
	}
	if a, _ := f.KV.String("general.architecture"); a != "qwen3" {
		t.Errorf("general.architecture = %q", a)
	}
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Detokenize(tok.Encode("Hello world", false)); got != "Hello world" {
		t.Errorf("round trip = %q", got)
	}
	v2, _ := LlamaSPMVocab(1024)
	if err := ReplaceVocab(path, v2); err == nil {
		t.Error("a vocabulary of another size was accepted")
	}
}

func tensorHashes(t *testing.T, path string) map[string][32]byte {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := map[string][32]byte{}
	for i := range f.Tensors {
		h[f.Tensors[i].Name] = sha256.Sum256(f.Data(&f.Tensors[i]))
	}
	return h
}
