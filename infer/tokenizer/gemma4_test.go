package tokenizer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// llama.cpp's Gemma 4 vocabulary file is 15.7 MB (262,144 tokens, 514,906
// merges). The tests keep a cut of it instead: every token and merge that
// can take part in tokenizing the texts they use, the rest blanked. A
// symbol is always a piece of its text, so only merges whose two sides can
// occur in those texts, and whose result is a piece of one, are kept (in
// their order, which is all a rank is used for), and only the tokens they
// can form: the texts tokenize exactly as with the whole file. Every token
// that is not a normal one (special, byte, unused) and every run of
// newlines stays.
// -update with -gemma4-vocab rewrites the cut and checks that it tokenizes
// every text as the whole file does.

var gemma4Full = flag.String("gemma4-vocab", "", "llama.cpp's models/ggml-vocab-gemma-4.gguf: with -update, cut testdata/"+gemma4Cut+" from it")

const gemma4Cut = "ggml-vocab-gemma-4-cut.gguf.gz"

var (
	gemma4Once sync.Once
	gemma4Tok  *Tokenizer
	gemma4Err  error
)

// gemma4 loads the cut Gemma 4 vocabulary, first rewriting it under -update.
func gemma4(t testing.TB) *Tokenizer {
	t.Helper()
	gemma4Once.Do(func() {
		if *update {
			if *gemma4Full == "" {
				gemma4Err = errNeedGemma4
				return
			}
			writeGemma4Cut(t)
		}
		gz, err := os.ReadFile("testdata/" + gemma4Cut)
		if err != nil {
			gemma4Err = err
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			gemma4Err = err
			return
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			gemma4Err = err
			return
		}
		f, err := gguf.Parse(data)
		if err != nil {
			gemma4Err = err
			return
		}
		gemma4Tok, gemma4Err = FromGGUF(f.KV)
	})
	if gemma4Err != nil {
		t.Fatalf("loading the cut Gemma 4 vocab: %v", gemma4Err)
	}
	return gemma4Tok
}

var errNeedGemma4 = errors.New("-update needs -gemma4-vocab=PATH (llama.cpp's models/ggml-vocab-gemma-4.gguf)")

// gemma4Texts are every text a test tokenizes with the cut vocabulary.
func gemma4Texts(t testing.TB) []string {
	texts, _ := readVectors(t, "testdata/ggml-vocab-gemma-4.gguf")
	return append(texts, goldenTexts(t)...)
}

// writeGemma4Cut cuts the whole vocabulary down to what gemma4Texts need.
func writeGemma4Cut(t testing.TB) {
	full, err := gguf.Open(*gemma4Full)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	tokens, _ := full.KV.Strings("tokenizer.ggml.tokens")
	types, _ := full.KV.Int32s("tokenizer.ggml.token_type")
	merges, _ := full.KV.Strings("tokenizer.ggml.merges")
	texts := gemma4Texts(t)

	// A symbol is always a piece of the escaped text it came from: sub
	// holds every piece up to the longest token's length. reach holds
	// every symbol the texts can come to: their characters, then whatever
	// a merge of two reachable symbols makes that is such a piece.
	maxLen := 0
	for _, tok := range tokens {
		maxLen = max(maxLen, len(tok))
	}
	sub := map[string]bool{}
	reach := map[string]bool{}
	for _, text := range texts {
		s := strings.ReplaceAll(replaceInvalid(text), " ", spaceMark)
		for i, r := range s {
			reach[string(r)] = true
			for j := i + 1; j <= min(len(s), i+maxLen); j++ {
				sub[s[i:j]] = true
			}
		}
	}
	sides := make([]textPair, len(merges))
	for i, line := range merges {
		if j := strings.IndexByte(line[min(1, len(line)):], ' '); j >= 0 {
			j += min(1, len(line))
			sides[i] = textPair{line[:j], line[j+1:]}
		}
	}
	for grew := true; grew; {
		grew = false
		for _, p := range sides {
			if m := p.left + p.right; reach[p.left] && reach[p.right] && sub[m] && !reach[m] {
				reach[m] = true
				grew = true
			}
		}
	}
	var keptMerges []string
	for i, p := range sides {
		if reach[p.left] && reach[p.right] && sub[p.left+p.right] {
			keptMerges = append(keptMerges, merges[i])
		}
	}
	cut := make([]string, len(tokens))
	for i, tok := range tokens {
		if types[i] != TypeNormal || reach[tok] || strings.Trim(tok, "\n") == "" {
			cut[i] = tok
		}
	}
	w := gguf.NewWriter()
	for _, k := range full.KV.Keys() {
		if strings.HasPrefix(k, "tokenizer.") && k != "tokenizer.ggml.scores" && k != "tokenizer.chat_template" || k == "general.architecture" {
			v, _ := full.KV.Get(k)
			w.Set(k, v)
		}
	}
	w.Set("tokenizer.ggml.tokens", cut)
	w.Set("tokenizer.ggml.merges", keptMerges)
	var raw bytes.Buffer
	if _, err := w.WriteTo(&raw); err != nil {
		t.Fatal(err)
	}

	// The cut must tokenize every text as the whole vocabulary does.
	whole, err := FromGGUF(full.KV)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := gguf.Parse(raw.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cutTok, err := FromGGUF(cf.KV)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range texts {
		for _, special := range []bool{false, true} {
			if a, b := whole.Encode(text, special), cutTok.Encode(text, special); !equalIDs(a, b) {
				t.Fatalf("the cut vocabulary tokenizes %q as %v, the whole one as %v", text, b, a)
			}
		}
	}

	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/"+gemma4Cut, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut Gemma 4 vocab: %d of %d merges, %d of %d tokens; %d bytes, %d gzipped",
		len(keptMerges), len(merges), countNonEmpty(cut), len(tokens), raw.Len(), gz.Len())
}

func countNonEmpty(s []string) int {
	n := 0
	for _, x := range s {
		if x != "" {
			n++
		}
	}
	return n
}

// FuzzEncodeGemma4: nothing panics, cutting runs into words before "▁"
// changes no token, and every text comes back from Decode with its spaces
// (and any literal "▁") as spaces and invalid bytes as U+FFFD. The cut
// vocabulary spells most text in byte tokens, which is what this exercises
// besides the merges it keeps.
func FuzzEncodeGemma4(f *testing.F) {
	for _, s := range []string{"", " ", "Hello world", "  x  \n\n y", "\n\n\n", "3.14159", "我想在apple工作", "🦙🦙", "<start_of_turn>a", "▁x▁", "\xff\xfe", "a\u00a0\u3000b"} {
		f.Add(s)
	}
	tok := gemma4(f)
	f.Fuzz(func(t *testing.T, text string) {
		ids := tok.Encode(text, false)
		for _, special := range []bool{false, true} {
			if got, want := tok.Encode(text, special), encodeRawWhole(tok, text, special); !equalIDs(got, want) {
				t.Fatalf("Encode(%q, %v) = %v cut into words, %v merged whole", text, special, got, want)
			}
		}
		if got, want := tok.Decode(ids), strings.ReplaceAll(replaceInvalid(text), spaceMark, " "); got != want {
			t.Fatalf("round trip of %q gave %q (ids %v)", text, got, ids)
		}
	})
}

// encodeRawWhole is encodeRawBPE without the cuts before "▁": each run of
// non-newlines merged whole, as llama.cpp does.
func encodeRawWhole(tok *Tokenizer, text string, allowSpecial bool) []int32 {
	text = replaceInvalid(text)
	var out []int32
	for _, f := range tok.partition(text, allowSpecial) {
		if f.special {
			out = append(out, f.id)
			continue
		}
		s := strings.ReplaceAll(f.text, " ", spaceMark)
		for len(s) > 0 {
			n := strings.IndexByte(s, '\n')
			if n == 0 {
				n = len(s) - len(strings.TrimLeft(s, "\n"))
				if id, ok := tok.ids[s[:n]]; ok {
					out = append(out, id)
					s = s[n:]
					continue
				}
			} else if n < 0 {
				n = len(s)
			}
			out = tok.mergeRawBPE(s[:n], out)
			s = s[n:]
		}
	}
	return out
}
