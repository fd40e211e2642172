package tokenizer

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// tinySPM is a hand-made SentencePiece vocabulary: <unk>, <s>, </s>, the
// byte tokens for 'a', 'b' and 0xC3 only, then pieces with chosen scores.
func tinySPM(prefix bool, pieces ...spmPiece) Config {
	c := Config{Model: "llama", BOS: 1, EOS: 2, UNK: 0, EOT: NoToken, EOM: NoToken, PAD: NoToken, AddSpacePrefix: prefix}
	add := func(text string, typ int32, score float32) {
		c.Tokens = append(c.Tokens, text)
		c.Types = append(c.Types, typ)
		c.Scores = append(c.Scores, score)
	}
	add("<unk>", TypeUnknown, 0)
	add("<s>", TypeControl, 0)
	add("</s>", TypeControl, 0)
	add("<0x61>", TypeByte, 0) // 3: a
	add("<0x62>", TypeByte, 0) // 4: b
	add("<0xC3>", TypeByte, 0) // 5
	for _, p := range pieces {
		add(p.text, p.typ, p.score)
	}
	return c
}

type spmPiece struct {
	text  string
	typ   int32
	score float32
}

func TestSPMEncode(t *testing.T) {
	n := TypeNormal
	tests := []struct {
		name   string
		c      Config
		text   string
		allow  bool
		want   []int32
		detok  string
		pieces string // Decode: the pieces as they are
	}{
		{
			name: "highest score merges first",
			// "ab" beats "bc", so "abc" is ab+c, not a+bc.
			c:    tinySPM(false, spmPiece{"c", n, -5}, spmPiece{"ab", n, -1}, spmPiece{"bc", n, -2}),
			text: "abc", want: []int32{7, 6}, detok: "abc", pieces: "abc",
		},
		{
			name: "equal scores merge leftmost first",
			c:    tinySPM(false, spmPiece{"a", n, -5}, spmPiece{"aa", n, -1}),
			text: "aaa", want: []int32{7, 6}, detok: "aaa", pieces: "aaa",
		},
		{
			name: "characters without a token fall back to bytes, or <unk> without a byte token",
			c:    tinySPM(false),
			text: "abé", want: []int32{3, 4, 5, 0}, detok: "ab\xc3<unk>", pieces: "ab\xc3<unk>",
		},
		{
			name: "space prefix at the start and after a special token, escaped spaces",
			c:    tinySPM(true, spmPiece{"\u2581", n, -3}, spmPiece{"a", n, -4}, spmPiece{"\u2581a", n, -1}),
			text: "a</s>a a", allow: true, want: []int32{8, 2, 8, 8}, detok: "a</s> a a", pieces: " a</s> a a",
		},
		{
			name: "control tokens are text unless allowed",
			c:    tinySPM(true, spmPiece{"\u2581", n, -3}),
			text: "</s>", want: []int32{6, 0, 0, 0, 0}, detok: "<unk><unk><unk><unk>", pieces: " <unk><unk><unk><unk>",
		},
		{
			name: "user-defined tokens are matched without allowSpecial",
			c:    tinySPM(false, spmPiece{"<u>", TypeUserDefined, 0}),
			text: "a<u>b", want: []int32{3, 6, 4}, detok: "a<u>b", pieces: "a<u>b",
		},
		{
			name: "empty text is no tokens, not a prefix space",
			c:    tinySPM(true, spmPiece{"\u2581", n, -3}),
			text: "", want: nil, detok: "", pieces: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := New(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			got := tok.Encode(tt.text, tt.allow)
			if !equalIDs(got, tt.want) {
				t.Errorf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
			}
			if d := tok.Detokenize(got); d != tt.detok {
				t.Errorf("Detokenize = %q, want %q", d, tt.detok)
			}
			if d := tok.Decode(got); d != tt.pieces {
				t.Errorf("Decode = %q, want %q", d, tt.pieces)
			}
		})
	}
}

// Phi-3's rule: special tokens (but <s>) take the whitespace after them.
func TestRStripSpecials(t *testing.T) {
	c := tinySPM(false, spmPiece{"<|end|>", TypeUserDefined, 0}, spmPiece{"\u2581", TypeNormal, -1})
	c.RStripSpecials = true
	tok, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Encode("a<|end|> \n\tb<s> a", true), []int32{3, 6, 4, 1, 7, 3}; !equalIDs(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSPMStreamDecoder(t *testing.T) {
	tok := llamaSPM(t)
	for _, text := range []string{"Hello 🦙 world", "ꙮ𓀀 x", "naïve"} {
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
		if got := sb.String(); got != tok.Decode(ids) || got != " "+text {
			t.Errorf("streamed %q, Decode %q, want %q", got, tok.Decode(ids), " "+text)
		}
	}
}

func TestSPMAccessors(t *testing.T) {
	tok := llamaSPM(t)
	if tok.BOS() != 1 || tok.EOS() != 2 || tok.UNK() != 0 || !tok.AddBOS() || tok.AddEOS() || !tok.IsEOG(2) || tok.IsEOG(1) {
		t.Errorf("bos %d eos %d unk %d add_bos %v add_eos %v eogs %v", tok.BOS(), tok.EOS(), tok.UNK(), tok.AddBOS(), tok.AddEOS(), tok.EOGs())
	}
	if p := tok.Piece(3 + 0x0A); p != "\n" {
		t.Errorf("<0x0A> piece = %q", p)
	}
}

// FuzzEncodeSPM: nothing panics, cutting fragments into words changes no
// token, and every valid UTF-8 text comes back
// from Detokenize, except that a literal "▁" in the text comes back as a
// space, as in llama.cpp (escaped and literal spaces are one token). Invalid
// UTF-8 need not: a stray lead byte before a space takes part of the "▁" the
// space became into its character, in llama.cpp too.
func FuzzEncodeSPM(f *testing.F) {
	for _, s := range []string{"", " ", "Hello world", "  x  ", "\n\n\t", "3.14159", "我想在apple工作", "🦙🦙", "<s>a</s>", "▁x▁", "a  b   c\n  d", "\xcb x", "x\xe2\x96 \xe2\x96\x81 y", "if (x) {\n    return;\n}", "\xff\xfe", "\xe2\x96", "a\u00a0\u3000b"} {
		f.Add(s)
	}
	tok := llamaSPM(f)
	f.Fuzz(func(t *testing.T, text string) {
		ids := tok.Encode(text, false)
		for _, special := range []bool{false, true} {
			if got, want := tok.Encode(text, special), encodeWhole(tok, text, special); !equalIDs(got, want) {
				t.Fatalf("Encode(%q, %v) = %v cut into words, %v merged whole", text, special, got, want)
			}
		}
		if !utf8.ValidString(text) {
			return
		}
		if got, want := tok.Detokenize(ids), strings.ReplaceAll(text, spaceMark, " "); got != want {
			t.Fatalf("round trip of %q gave %q (ids %v)", text, got, ids)
		}
	})
}

// encodeWhole is encodeSPM without the cuts into words: each fragment
// merged whole, as llama.cpp does.
func encodeWhole(tok *Tokenizer, text string, allowSpecial bool) []int32 {
	if text == "" {
		return nil
	}
	var out []int32
	prevSpecial := true
	for _, f := range tok.partition(text, allowSpecial) {
		if f.special {
			out = append(out, f.id)
			prevSpecial = true
			continue
		}
		s := f.text
		if tok.addSpacePrefix && prevSpecial {
			s = " " + s
		}
		prevSpecial = false
		out, _, _ = tok.spmFragment(strings.ReplaceAll(s, " ", spaceMark), out, nil, nil)
	}
	return out
}

// BenchmarkEncodeSPM encodes the repository's README (English prose, code
// and tables, 28 KB) with the Llama 2 vocabulary, with the word cache
// emptied before each pass (cold) or kept (warm).
func BenchmarkEncodeSPM(b *testing.B) {
	tok := llamaSPM(b)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		b.Fatal(err)
	}
	text := string(readme)
	for _, cold := range []bool{true, false} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var n int
			for b.Loop() {
				if cold {
					tok.cacheMu.Lock()
					clear(tok.cache)
					tok.cacheBytes = 0
					tok.cacheMu.Unlock()
				}
				n = len(tok.Encode(text, false))
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// Cutting fragments into words before "▁" changes no token: the README and
// the test vectors, merged whole and in words, with both vocabularies.
func TestSPMWordsMatchWhole(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	texts, _ := readVectors(t, "testdata/ggml-vocab-llama-spm.gguf")
	texts = append(texts, string(readme))
	for _, tok := range []*Tokenizer{llamaSPM(t), vocabFile("phi-3")(t)} {
		// Llama 2's and Phi-3's tokens have "▁" after "▁" only ("▁▁▁▁"):
		// every other "▁" starts a word.
		if len(tok.spaceJoins) != 1 || !tok.spaceJoins['\u2581'] {
			t.Errorf("spaceJoins = %v, want only ▁", tok.spaceJoins)
		}
		for _, text := range texts {
			if got, want := tok.Encode(text, true), encodeWhole(tok, text, true); !equalIDs(got, want) {
				t.Errorf("Encode(%.40q…) differs in words (%d tokens) and whole (%d)", text, len(got), len(want))
			}
		}
	}
}

// Runs with no cut merge in 64 KB pieces, so memory and time stay bounded;
// text shorter than that is merged whole.
func TestLongWordPieces(t *testing.T) {
	for _, tc := range []struct {
		word   string
		pieces int
	}{
		{strings.Repeat("a", maxMergeBytes), 1},
		{strings.Repeat("a", 3*maxMergeBytes+1), 4},
		{strings.Repeat("我", 2*(maxMergeBytes/3)+1), 3}, // 3 bytes a character: never cut inside one
	} {
		pieces := longWordPieces(tc.word)
		if len(pieces) != tc.pieces || strings.Join(pieces, "") != tc.word {
			t.Errorf("%d bytes: %d pieces, want %d, joined back %v", len(tc.word), len(pieces), tc.pieces, strings.Join(pieces, "") == tc.word)
		}
		for _, p := range pieces {
			if len(p) > maxMergeBytes || !utf8.ValidString(p) {
				t.Errorf("piece of %d bytes, valid %v", len(p), utf8.ValidString(p))
			}
		}
	}
	tok := llamaSPM(t)
	text := strings.Repeat("a", 1<<20)
	if got := tok.Detokenize(tok.Encode(text, false)); got != text {
		t.Errorf("1 MB of \"a\" did not come back")
	}
}

// An empty token is "[EMPTY_<id>]", as llama.cpp loads it: a control one is
// matched in text by that name.
func TestEmptyToken(t *testing.T) {
	c := tinySPM(false, spmPiece{"", TypeControl, 0})
	tok, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token(6) != "[EMPTY_6]" || c.Tokens[6] != "" {
		t.Errorf("token 6 = %q (config's %q)", tok.Token(6), c.Tokens[6])
	}
	if got := tok.Encode("a[EMPTY_6]", true); !equalIDs(got, []int32{3, 6}) {
		t.Errorf("Encode = %v", got)
	}
}
