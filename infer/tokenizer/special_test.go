package tokenizer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

// added is a token appended to a byte-only test vocabulary.
type added struct {
	text string
	typ  int32
}

// byteVocab is a vocabulary of the 256 byte tokens (ids 0–255) followed by
// extra, with no merges: text that is not a special token comes out as one
// token per byte.
func byteVocab(extra ...added) Config {
	c := Config{Model: "gpt2", Pre: "qwen2", BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken}
	for b := 0; b < 256; b++ {
		c.Tokens = append(c.Tokens, string(byteRunes[b]))
		c.Types = append(c.Types, TypeNormal)
	}
	for _, a := range extra {
		c.Tokens = append(c.Tokens, a.text)
		c.Types = append(c.Types, a.typ)
	}
	return c
}

// want is how llama.cpp treats one token after loading the vocabulary.
type want struct {
	text    string
	control bool // skipped by Encode unless allowSpecial
	matched bool // cut out of the text as one token (with allowSpecial)
	eog     bool
}

func TestLlamaCppLoadRules(t *testing.T) {
	const (
		ud   = TypeUserDefined
		ctl  = TypeControl
		norm = TypeNormal
	)
	tests := []struct {
		name   string
		extra  []added
		config func(c *Config, id func(string) int32)
		want   []want
	}{
		{
			name:  "user-defined FIM tokens become control; pad, repo and separator end generation",
			extra: []added{{"<|fim_prefix|>", ud}, {"<|fim_suffix|>", ud}, {"<|fim_middle|>", ud}, {"<|fim_pad|>", ud}, {"<|repo_name|>", ud}, {"<|file_sep|>", ud}, {"<tool_call>", ud}},
			want: []want{
				{"<|fim_prefix|>", true, true, false},
				{"<|fim_suffix|>", true, true, false},
				{"<|fim_middle|>", true, true, false},
				{"<|fim_pad|>", true, true, true},
				{"<|repo_name|>", true, true, true},
				{"<|file_sep|>", true, true, true},
				{"<tool_call>", false, true, false},
			},
		},
		{
			name:  "other FIM spellings",
			extra: []added{{"<fim_prefix>", ud}, {"<｜fim▁hole｜>", ud}, {"▁<MID>", ud}, {"[PAD]", ud}, {"<reponame>", ud}},
			want: []want{
				{"<fim_prefix>", true, true, false},
				{"<｜fim▁hole｜>", true, true, false},
				{"▁<MID>", true, true, false},
				{"[PAD]", true, true, true},
				{"<reponame>", true, true, true},
			},
		},
		{
			name:  "a FIM role the file names is not looked up by text",
			extra: []added{{"<my_pad>", ud}, {"<|fim_pad|>", ud}, {"<|fim_prefix|>", ud}},
			config: func(c *Config, id func(string) int32) {
				c.FIM = map[FIMRole]int32{FIMPad: id("<my_pad>")}
			},
			want: []want{
				{"<my_pad>", false, true, true},
				{"<|fim_pad|>", false, true, false},
				{"<|fim_prefix|>", true, true, false},
			},
		},
		{
			name:  "end-of-generation spellings become control, even normal ones",
			extra: []added{{"<|im_end|>", ud}, {"<|endoftext|>", ctl}, {"</s>", norm}, {"<|eom_id|>", ud}, {"[EOS]", norm}, {"<end_of_turn>", ud}, {"<|im_start|>", ctl}},
			want: []want{
				{"<|im_end|>", true, true, true},
				{"<|endoftext|>", true, true, true},
				{"</s>", true, true, true},
				{"<|eom_id|>", true, true, true},
				{"[EOS]", true, true, true},
				{"<end_of_turn>", true, true, true},
				{"<|im_start|>", true, true, false},
			},
		},
		{
			name:  "EOS, EOT and EOM the file names end generation",
			extra: []added{{"<my_eos>", ud}, {"<my_eot>", ctl}, {"<my_eom>", ctl}, {"<|eot_id|>", ud}},
			config: func(c *Config, id func(string) int32) {
				c.EOS, c.EOT, c.EOM = id("<my_eos>"), id("<my_eot>"), id("<my_eom>")
			},
			want: []want{
				{"<my_eos>", false, true, true},
				{"<my_eot>", true, true, true},
				{"<my_eom>", true, true, true},
				{"<|eot_id|>", true, true, true},
			},
		},
		{
			name:  "gpt-oss channel tokens are user-defined",
			extra: []added{{"<|channel|>", ctl}, {"<|message|>", ctl}, {"<|start|>", ctl}, {"<|constrain|>", norm}},
			want: []want{
				{"<|channel|>", false, true, false},
				{"<|message|>", false, true, false},
				{"<|start|>", false, true, false},
				{"<|constrain|>", false, true, false},
			},
		},
		{
			name:  "harmony: <|end|> does not end generation next to <|return|> and <|call|>",
			extra: []added{{"<|end|>", ctl}, {"<|return|>", ctl}, {"<|call|>", ctl}},
			want: []want{
				{"<|end|>", false, true, false},
				{"<|return|>", true, true, true},
				{"<|call|>", true, true, true},
			},
		},
		{
			name:  "solar-open: <|end|> does not end generation next to <|calls|> and <|flush|>",
			extra: []added{{"<|end|>", ctl}, {"<|calls|>", ud}, {"<|flush|>", ud}},
			want: []want{
				{"<|end|>", false, true, false},
				{"<|calls|>", true, true, true},
				{"<|flush|>", true, true, true},
			},
		},
		{
			name:  "<|end|> with <|return|> alone still ends generation",
			extra: []added{{"<|end|>", ud}, {"<|return|>", ud}},
			want: []want{
				{"<|end|>", true, true, true},
				{"<|return|>", true, true, true},
			},
		},
		{
			name:  "gemma4: </s> is plain text next to <|tool_response>",
			extra: []added{{"</s>", ctl}, {"<|tool_response>", ud}},
			want: []want{
				{"</s>", false, false, false},
				{"<|tool_response>", true, true, true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := byteVocab(tt.extra...)
			id := func(text string) int32 {
				i := slices.Index(c.Tokens, text)
				if i < 0 {
					t.Fatalf("%q is not in the test vocabulary", text)
				}
				return int32(i)
			}
			if tt.config != nil {
				tt.config(&c, id)
			}
			tok, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				tid := id(w.text)
				single := []int32{tid}
				if got := tok.IsControl(tid); got != w.control {
					t.Errorf("IsControl(%q) = %v, want %v", w.text, got, w.control)
				}
				if got := tok.IsEOG(tid); got != w.eog {
					t.Errorf("IsEOG(%q) = %v, want %v", w.text, got, w.eog)
				}
				plainMatch := w.matched && !w.control
				if got := tok.Encode(w.text, false); equalIDs(got, single) != plainMatch {
					t.Errorf("Encode(%q, false) = %v, matched as one token: %v, want %v", w.text, got, !plainMatch, plainMatch)
				}
				if got := tok.Encode(w.text, true); equalIDs(got, single) != w.matched {
					t.Errorf("Encode(%q, true) = %v, matched as one token: %v, want %v", w.text, got, !w.matched, w.matched)
				}
				if got := tok.Decode([]int32{tid}); got != w.text {
					t.Errorf("Decode(%q) = %q", w.text, got)
				}
			}
		})
	}
}

func TestEOTDetection(t *testing.T) {
	tests := []struct {
		name  string
		extra []added
		eot   string // "" for none
	}{
		{"chatml", []added{{"<|endoftext|>", TypeControl}, {"<|im_end|>", TypeControl}}, "<|im_end|>"},
		{"llama3", []added{{"<|end_of_text|>", TypeControl}, {"<|eot_id|>", TypeControl}}, "<|eot_id|>"},
		{"granite", []added{{"<|end_of_text|>", TypeControl}}, "<|end_of_text|>"},
		{"deepseek", []added{{"<｜end▁of▁sentence｜>", TypeControl}}, "<｜end▁of▁sentence｜>"},
		{"none", []added{{"<|im_start|>", TypeControl}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := New(byteVocab(tt.extra...))
			if err != nil {
				t.Fatal(err)
			}
			want := NoToken
			if tt.eot != "" {
				want, _ = tok.ID(tt.eot)
			}
			if got := tok.EOT(); got != want {
				t.Errorf("EOT() = %d (%q), want %d (%q)", got, tok.Token(got), want, tt.eot)
			}
		})
	}
}

// TestQwen3LoadRules pins what llama.cpp makes of the Qwen3 tokenizer that
// Bonsai ships (checked against llama.cpp's llama_vocab_is_eog through
// node-llama-cpp): the user-defined FIM tokens are control tokens, and the
// normal token "</s>" of the Qwen2 vocab ends generation too.
func TestQwen3LoadRules(t *testing.T) {
	v, err := qwen.Qwen3Vocab()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(Config{Model: v.Model, Pre: v.Pre, Tokens: v.Tokens, Types: v.Types, Merges: v.Merges,
		BOS: qwen.BOS, EOS: qwen.EOS, EOT: NoToken, EOM: NoToken, PAD: qwen.PAD})
	if err != nil {
		t.Fatal(err)
	}
	const slashS, fimPrefix, fimPad, repoName, fileSep = 128247, 151659, 151662, 151663, 151664
	wantEOG := []int32{slashS, qwen.EndOfText, qwen.IMEnd, fimPad, repoName, fileSep}
	if got := tok.EOGs(); !equalIDs(got, wantEOG) {
		t.Errorf("EOGs() = %v, want %v", got, wantEOG)
	}
	if got := tok.Encode("<|fim_prefix|>x", false); slices.Contains(got, fimPrefix) {
		t.Errorf("Encode(<|fim_prefix|>x, false) = %v: FIM token matched without allowSpecial", got)
	}
	if got := tok.Encode("<|fim_prefix|>x", true); !equalIDs(got, []int32{fimPrefix, 87}) {
		t.Errorf("Encode(<|fim_prefix|>x, true) = %v", got)
	}
	if got := tok.Encode("</s>", true); !equalIDs(got, []int32{slashS}) {
		t.Errorf("Encode(</s>, true) = %v, want [%d]", got, slashS)
	}
	if got := tok.Type(fimPrefix); got != TypeUserDefined {
		t.Errorf("Type(<|fim_prefix|>) = %d: Type reports the stored type", got)
	}
}

// TestFromGGUFSpecialIDs checks the metadata FromGGUF reads for special
// tokens: the FIM keys (the deprecated ones winning, as they do in
// llama.cpp), and llama.cpp's BOS/EOS default of 11 for byte-level BPE.
func TestFromGGUFSpecialIDs(t *testing.T) {
	c := byteVocab(added{"<pad_a>", TypeUserDefined}, added{"<pad_b>", TypeUserDefined}, added{"<pre>", TypeUserDefined})
	const padA, padB, pre = 256, 257, 258
	load := func(set func(w *gguf.Writer)) *Tokenizer {
		t.Helper()
		w := gguf.NewWriter()
		w.Set("tokenizer.ggml.model", c.Model)
		w.Set("tokenizer.ggml.pre", c.Pre)
		w.Set("tokenizer.ggml.tokens", c.Tokens)
		w.Set("tokenizer.ggml.token_type", c.Types)
		w.Set("tokenizer.ggml.merges", []string{})
		set(w)
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
		return tok
	}

	tok := load(func(w *gguf.Writer) {
		w.Set("tokenizer.ggml.eos_token_id", uint32(padB))
		w.Set("tokenizer.ggml.fim_pad_token_id", uint32(padA))
		w.Set("tokenizer.ggml.fim_pre_token_id", uint32(padA))
		w.Set("tokenizer.ggml.prefix_token_id", uint32(pre))
	})
	if !tok.IsEOG(padA) || !tok.IsEOG(padB) || tok.IsEOG(pre) {
		t.Errorf("EOGs() = %v, want [%d %d] (FIM pad and EOS)", tok.EOGs(), padA, padB)
	}
	if tok.IsControl(pre) || tok.IsControl(padA) {
		t.Errorf("tokens named by metadata changed type: control %v %v", tok.IsControl(pre), tok.IsControl(padA))
	}
	if tok.BOS() != 11 || tok.EOS() != padB {
		t.Errorf("BOS/EOS = %d/%d, want 11 (llama.cpp's default)/%d", tok.BOS(), tok.EOS(), padB)
	}

	tok = load(func(w *gguf.Writer) {})
	if tok.BOS() != 11 || tok.EOS() != 11 || !equalIDs(tok.EOGs(), []int32{11}) {
		t.Errorf("no special ids: BOS/EOS = %d/%d, EOGs %v; want 11/11 and [11] as llama.cpp", tok.BOS(), tok.EOS(), tok.EOGs())
	}

	// A FIM id past the vocabulary is a clear error, not a silent fallback.
	f := func(w *gguf.Writer) { w.Set("tokenizer.ggml.fim_sep_token_id", uint32(len(c.Tokens))) }
	w := gguf.NewWriter()
	w.Set("tokenizer.ggml.model", c.Model)
	w.Set("tokenizer.ggml.tokens", c.Tokens)
	f(w)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromGGUF(g.KV); err == nil {
		t.Error("fim_sep_token_id outside the vocabulary: no error")
	}
}

func TestConfigFIMErrors(t *testing.T) {
	for _, fim := range []map[FIMRole]int32{{FIMPad: 9999}, {FIMRole(42): 1}, {FIMSuffix: -2}} {
		c := byteVocab()
		c.FIM = fim
		if _, err := New(c); err == nil {
			t.Errorf("FIM %v: no error", fim)
		}
	}
}
