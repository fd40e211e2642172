package tokenizer

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/llamaspm"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

var update = flag.Bool("update", false, "ask llama.cpp (tools/oracle) anew and rewrite testdata/llamacpp-*.json")

// goldenExtras are texts beyond llama.cpp's test vectors: special tokens of
// the families written as text (matched or not, with the whitespace around
// them), escaped spaces, characters no vocabulary has, and the punctuation
// and contractions llama.cpp's detokenizer tidies.
var goldenExtras = []string{
	"<s>Hello</s> world",
	"<s> <s>  x</s>\n</s>",
	"[INST] Hi [/INST]",
	"<|user|>\nHi there<|end|>\n<|assistant|>\n  Sure<|endoftext|>",
	"<|system|> x <|end|>  \n y<|end|>",
	"<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
	"<start_of_image> <start_of_image>x",
	"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
	"<unk> a <unk>",
	"▁already ▁escaped▁",
	"  leading and trailing  ",
	"\t\ttabs\n\nnewlines\r\n",
	"Rare: 𝕏 𓀀 \U0010FFFD \u0378 ꙮ",
	"I'm here . Yes , right ? ' no ' ok 're 've 's 'm 'll 't 'd !",
	"a",
	" ",
	"",
}

// golden is llama.cpp's answer for one vocabulary.
type golden struct {
	Texts        []string  `json:"texts"`
	Plain        [][]int32 `json:"plain"`
	Special      [][]int32 `json:"special"`
	DetokPlain   []string  `json:"detok_plain"`
	DetokSpecial []string  `json:"detok_special"`
}

// goldenCase is a vocabulary: the file llama.cpp reads, and the tokenizer
// under test (by default, the same file's).
type goldenCase struct {
	name  string
	vocab func(t *testing.T) string
	tok   func(t *testing.T) *Tokenizer
}

// gemmaStyle is the Llama 2 vocabulary made to tokenize as Gemma 3's does
// (llama.cpp has no Gemma 3 vocabulary file; Gemma 3 is SentencePiece
// without add_space_prefix): no space prefix, and Gemma's turn markers as
// control tokens and an image marker as a user-defined one.
func gemmaStyle(t *testing.T) string {
	f, err := gguf.Parse(llamaspm.VocabGGUF)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, k := range f.KV.Keys() {
		v, _ := f.KV.Get(k)
		w.Set(k, v)
	}
	tokens, _ := f.KV.Strings("tokenizer.ggml.tokens")
	scores, _ := f.KV.Float32s("tokenizer.ggml.scores")
	types, _ := f.KV.Int32s("tokenizer.ggml.token_type")
	tokens = append(slices.Clone(tokens), "<start_of_turn>", "<end_of_turn>", "<start_of_image>")
	scores = append(slices.Clone(scores), 0, 0, 0)
	types = append(slices.Clone(types), TypeControl, TypeControl, TypeUserDefined)
	w.Set("general.name", "gemma-style")
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.scores", scores)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.add_space_prefix", false)
	path := filepath.Join(t.TempDir(), "gemma-style.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func embeddedFile(data []byte) func(t *testing.T) string {
	return func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "vocab.gguf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
}

func testdataFile(name string) func(t *testing.T) string {
	return func(t *testing.T) string { return "testdata/ggml-vocab-" + name + ".gguf" }
}

// goldenTexts are llama.cpp's test vector texts and goldenExtras.
func goldenTexts(t testing.TB) []string {
	texts, _ := readVectors(t, "testdata/ggml-vocab-llama-spm.gguf")
	return append(texts, goldenExtras...)
}

// TestLlamaCppGoldens holds Encode (with and without special tokens) and
// Detokenize to llama.cpp's answers on each vocabulary, stored in
// testdata/llamacpp-NAME.json; -update asks llama.cpp anew (Gemma 4's
// needs -gemma4-vocab too: see gemma4_test.go).
func TestLlamaCppGoldens(t *testing.T) {
	texts := goldenTexts(t)
	for _, c := range []goldenCase{
		{name: "llama-spm", vocab: embeddedFile(llamaspm.VocabGGUF)},
		{name: "phi-3", vocab: testdataFile("phi-3")},
		{name: "gemma-style", vocab: gemmaStyle},
		{name: "llama-bpe", vocab: testdataFile("llama-bpe")},
		{name: "qwen2", vocab: embeddedFile(qwen.VocabGGUF)},
		{name: "gemma-4", vocab: func(t *testing.T) string { return *gemma4Full }, tok: func(t *testing.T) *Tokenizer { return gemma4(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var path string
			if *update || c.tok == nil {
				path = c.vocab(t)
			}
			g := readGolden(t, c.name, path, texts)
			var tok *Tokenizer
			if c.tok != nil {
				tok = c.tok(t)
			} else {
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if tok, err = FromGGUF(f.KV); err != nil {
					t.Fatal(err)
				}
			}
			for i, text := range texts {
				plain, special := tok.Encode(text, false), tok.Encode(text, true)
				if !equalIDs(plain, g.Plain[i]) {
					t.Errorf("Encode(%q)\n got       %v\n llama.cpp %v", text, plain, g.Plain[i])
				}
				if !equalIDs(special, g.Special[i]) {
					t.Errorf("Encode(%q, special)\n got       %v\n llama.cpp %v", text, special, g.Special[i])
				}
				if got := tok.Detokenize(g.Plain[i]); got != g.DetokPlain[i] {
					t.Errorf("Detokenize(%v) = %q, llama.cpp %q", g.Plain[i], got, g.DetokPlain[i])
				}
				if got := tok.Detokenize(g.Special[i]); got != g.DetokSpecial[i] {
					t.Errorf("Detokenize(%v) = %q, llama.cpp %q", g.Special[i], got, g.DetokSpecial[i])
				}
			}
		})
	}
}

// readGolden reads testdata/llamacpp-NAME.json, first rewriting it from
// llama.cpp under -update.
func readGolden(t *testing.T, name, vocab string, texts []string) golden {
	t.Helper()
	path := filepath.Join("testdata", "llamacpp-"+name+".json")
	if *update {
		req := filepath.Join(t.TempDir(), "request.json")
		b, err := json.Marshal(map[string][]string{"texts": texts})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(req, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("node", "testdata/llamacpp.mjs", vocab, req).Output()
		if err != nil {
			t.Fatalf("asking llama.cpp (is tools/oracle installed?): %v", err)
		}
		var g golden
		if err := json.Unmarshal(out, &g); err != nil {
			t.Fatalf("llama.cpp's answer: %v", err)
		}
		g.Texts = texts
		b, err = json.MarshalIndent(g, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./infer/tokenizer -run LlamaCppGoldens -update` with tools/oracle installed)", err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := len(texts)
	if !slices.Equal(g.Texts, texts) || len(g.Plain) != n || len(g.Special) != n || len(g.DetokPlain) != n || len(g.DetokSpecial) != n {
		t.Fatalf("%s is stale: rerun with -update", path)
	}
	return g
}
