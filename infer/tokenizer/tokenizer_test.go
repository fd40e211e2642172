package tokenizer

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/llamaspm"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

// qwen2 loads llama.cpp's ggml-vocab-qwen2.gguf, the vocab the test vectors
// were made with.
func qwen2(t testing.TB) *Tokenizer {
	t.Helper()
	qwenOnce.Do(func() {
		f, err := gguf.Parse(qwen.VocabGGUF)
		if err != nil {
			qwenErr = err
			return
		}
		qwenTok, qwenErr = FromGGUF(f.KV)
	})
	if qwenErr != nil {
		t.Fatalf("loading the qwen2 vocab: %v", qwenErr)
	}
	return qwenTok
}

var (
	spmOnce sync.Once
	spmTok  *Tokenizer
	spmErr  error
)

// llamaSPM loads llama.cpp's ggml-vocab-llama-spm.gguf (embedded in package
// llamaspm).
func llamaSPM(t testing.TB) *Tokenizer {
	t.Helper()
	spmOnce.Do(func() {
		f, err := gguf.Parse(llamaspm.VocabGGUF)
		if err != nil {
			spmErr = err
			return
		}
		spmTok, spmErr = FromGGUF(f.KV)
	})
	if spmErr != nil {
		t.Fatalf("loading the llama-spm vocab: %v", spmErr)
	}
	return spmTok
}

// TestLlamaCppVectors runs llama.cpp's test-tokenizer-0 vectors, one
// vocabulary per pre-tokenizer family: the .inp file holds texts separated
// by "\n__ggml_vocab_test__\n", the .out file one line of ids per text
// (encoded without special-token parsing or BOS). qwen2 is the Qwen regex,
// llama-bpe its three-digit variant with ignore_merges, gpt-2 GPT-2's own
// regex and starcoder that regex after splitting off every digit;
// llama-spm and phi-3 are SentencePiece vocabularies (phi-3's with
// user-defined tokens that swallow the whitespace after them); gemma-4 is
// Gemma 4's BPE over characters (a cut of the file: see gemma4_test.go).
// Every text must also come back: from Decode for BPE, from Detokenize
// (which drops SentencePiece's prefix space) for SentencePiece.
func TestLlamaCppVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		tok  func(t *testing.T) *Tokenizer
	}{
		{"qwen2", func(t *testing.T) *Tokenizer { return qwen2(t) }},
		{"llama-bpe", vocabFile("llama-bpe")},
		{"gpt-2", vocabFile("gpt-2")},
		{"starcoder", vocabFile("starcoder")},
		{"llama-spm", func(t *testing.T) *Tokenizer { return llamaSPM(t) }},
		{"phi-3", vocabFile("phi-3")},
		{"gemma-4", func(t *testing.T) *Tokenizer { return gemma4(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.tok(t)
			texts, wants := readVectors(t, "testdata/ggml-vocab-"+tc.name+".gguf")
			for i, text := range texts {
				got := tok.Encode(text, false)
				if !equalIDs(got, wants[i]) {
					t.Errorf("vector %d %q:\n got %v\nwant %v", i, text, got, wants[i])
				}
				dec := tok.Decode(got)
				if tok.kind == kindSPM {
					dec = tok.Detokenize(got)
				}
				if dec != text {
					t.Errorf("vector %d: decode = %q, want %q", i, dec, text)
				}
			}
		})
	}
}

// vocabFile loads testdata/ggml-vocab-NAME.gguf, one of llama.cpp's
// tensor-less vocabulary files.
func vocabFile(name string) func(t *testing.T) *Tokenizer {
	return func(t *testing.T) *Tokenizer {
		t.Helper()
		f, err := gguf.Open("testdata/ggml-vocab-" + name + ".gguf")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		tok, err := FromGGUF(f.KV)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// readVectors reads a vocabulary's .inp texts and .out ids.
func readVectors(t testing.TB, base string) ([]string, [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	if texts[len(texts)-1] == "" {
		texts = texts[:len(texts)-1] // most files end with a separator
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(texts) != len(lines) || len(texts) == 0 {
		t.Fatalf("%d texts but %d expected lines", len(texts), len(lines))
	}
	wants := make([][]int32, len(lines))
	for i, line := range lines {
		for _, f := range strings.Fields(line) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", base, i+1, err)
			}
			wants[i] = append(wants[i], int32(n))
		}
	}
	return texts, wants
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSpecialTokens(t *testing.T) {
	tok := qwen2(t)
	const text = "<|im_start|>user\nhi<|im_end|>"
	withSpecial := tok.Encode(text, true)
	if withSpecial[0] != 151644 || withSpecial[len(withSpecial)-1] != 151645 {
		t.Errorf("allowSpecial: got %v, want 151644 … 151645", withSpecial)
	}
	for _, id := range tok.Encode(text, false) {
		if id >= 151643 {
			t.Errorf("without allowSpecial a control token %d was matched", id)
		}
	}
	if got := tok.Decode(tok.Encode(text, false)); got != text {
		t.Errorf("plain round trip = %q", got)
	}
	// User-defined tokens are matched even without allowSpecial, as in llama.cpp.
	if got := tok.Encode("a[PAD151650]b", false); !equalIDs(got, []int32{64, 151650, 65}) {
		t.Errorf("user-defined token: got %v", got)
	}
	if !tok.IsEOG(151643) || !tok.IsEOG(151645) || tok.IsEOG(151644) {
		t.Errorf("EOG set = %v", tok.EOGs())
	}
	if tok.BOS() != 151643 || tok.EOS() != 151643 {
		t.Errorf("bos/eos = %d/%d", tok.BOS(), tok.EOS())
	}
	if tok.Vocab() != qwen.VocabSize {
		t.Errorf("vocab = %d", tok.Vocab())
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := qwen2(t)
	for _, text := range []string{"Hello 🦙 world", "我想在apple工作1314151天～", "ﬁ 😶‍🌫️ café", "plain"} {
		ids := tok.Encode(text, false)
		d := tok.NewStreamDecoder()
		var sb strings.Builder
		for _, id := range ids {
			piece := d.Next(id)
			if !utf8.ValidString(piece) {
				t.Errorf("%q: piece %q is not valid UTF-8", text, piece)
			}
			sb.WriteString(piece)
		}
		sb.WriteString(d.Flush())
		if sb.String() != text {
			t.Errorf("streamed %q, want %q", sb.String(), text)
		}
	}
	d := tok.NewStreamDecoder()
	// "🦙" is split over several byte tokens: nothing may come out before it
	// is complete.
	b := []byte("🦙")
	for i, c := range b {
		id := tok.byteToken[c]
		got := d.Next(id)
		if i < len(b)-1 && got != "" {
			t.Errorf("byte %d: got %q before the character was complete", i, got)
		}
		if i == len(b)-1 && got != "🦙" {
			t.Errorf("last byte: got %q", got)
		}
	}
	d.Next(tok.byteToken[0xF0])
	if got := d.Flush(); got != "\uFFFD" {
		t.Errorf("flush of a dangling lead byte = %q", got)
	}
}

func TestInvalidUTF8(t *testing.T) {
	tok := qwen2(t)
	got := tok.Decode(tok.Encode("a\xffb", false))
	if got != "a\uFFFDb" {
		t.Errorf("invalid byte round trip = %q, want a\\uFFFDb", got)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		c    Config
	}{
		{"unknown model", Config{Model: "bert", Tokens: []string{"a"}}},
		{"scores for fewer tokens", Config{Model: "llama", Tokens: []string{"a", "b"}, Scores: []float32{0}, BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken, UNK: NoToken}},
		{"unknown id outside", Config{Model: "llama", Tokens: []string{"a"}, BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken, UNK: 5}},
		{"unknown pre", Config{Model: "gpt2", Pre: "nope", Tokens: []string{"a"}}},
		{"no byte tokens", Config{Model: "gpt2", Pre: "qwen2", Tokens: []string{"a"}, BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken}},
	}
	for _, tt := range tests {
		if _, err := New(tt.c); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	tok := qwen2(b)
	inp, err := os.ReadFile("testdata/ggml-vocab-qwen2.gguf.inp")
	if err != nil {
		b.Fatal(err)
	}
	text := string(inp)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.cache = map[string][]int32{}
		tok.Encode(text, false)
	}
}

func BenchmarkLoad(b *testing.B) {
	f, err := gguf.Parse(qwen.VocabGGUF)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := FromGGUF(f.KV); err != nil {
			b.Fatal(err)
		}
	}
}

func TestQwen3Overlay(t *testing.T) {
	v, err := qwen.Qwen3Vocab()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(Config{Model: v.Model, Pre: v.Pre, Tokens: v.Tokens, Types: v.Types, Merges: v.Merges,
		BOS: qwen.BOS, EOS: qwen.EOS, EOT: NoToken, EOM: NoToken, PAD: qwen.PAD})
	if err != nil {
		t.Fatal(err)
	}
	prompt := "<|im_start|>assistant\n<think>\n\n</think>\n\nHi<|im_end|>"
	want := []int32{qwen.IMStart, 77091, 198, qwen.ThinkStart, 271, qwen.ThinkEnd, 271, 13048, qwen.IMEnd}
	if got := tok.Encode(prompt, true); !equalIDs(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// <think> is user-defined: matched even when control tokens are not.
	if got := tok.Encode("<think>", false); !equalIDs(got, []int32{qwen.ThinkStart}) {
		t.Errorf("<think> without allowSpecial = %v", got)
	}
	if tok.EOT() != qwen.IMEnd || !tok.IsEOG(qwen.IMEnd) || !tok.IsEOG(qwen.EndOfText) {
		t.Errorf("eot %d, eogs %v", tok.EOT(), tok.EOGs())
	}
}
