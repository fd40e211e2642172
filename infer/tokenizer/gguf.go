package tokenizer

import (
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// gpt2DefaultBOSEOS is the BOS and EOS id llama.cpp assumes for byte-level
// BPE vocabularies whose file names none.
const gpt2DefaultBOSEOS = 11

// FromGGUF builds the tokenizer a GGUF file describes in its tokenizer.ggml.*
// keys.
func FromGGUF(kv gguf.Metadata) (*Tokenizer, error) {
	var c Config
	var ok bool
	if c.Model, ok = kv.String("tokenizer.ggml.model"); !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.model missing or not a string", ErrInvalid)
	}
	c.Pre, _ = kv.String("tokenizer.ggml.pre")
	if c.Pre == "" {
		c.Pre = "default"
	}
	if c.Tokens, ok = kv.Strings("tokenizer.ggml.tokens"); !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens missing or not a string array", ErrInvalid)
	}
	if _, present := kv.Get("tokenizer.ggml.token_type"); present {
		if c.Types, ok = kv.Int32s("tokenizer.ggml.token_type"); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.token_type is not an integer array", ErrInvalid)
		}
	}
	if _, present := kv.Get("tokenizer.ggml.scores"); present {
		if c.Scores, ok = scores(kv); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.scores is not a number array", ErrInvalid)
		}
		if c.Model != "llama" {
			c.Scores = nil // only SentencePiece merges by score
		} else if len(c.Scores) < len(c.Tokens) {
			return nil, fmt.Errorf("%w: %d token scores for %d tokens", ErrInvalid, len(c.Scores), len(c.Tokens))
		} else {
			c.Scores = c.Scores[:len(c.Tokens)]
		}
	}
	if _, present := kv.Get("tokenizer.ggml.merges"); present {
		if c.Merges, ok = kv.Strings("tokenizer.ggml.merges"); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.merges is not a string array", ErrInvalid)
		}
	}
	special := func(name string) (int32, error) {
		key := "tokenizer.ggml." + name + "_token_id"
		if _, present := kv.Get(key); !present {
			return NoToken, nil
		}
		id, ok := kv.Uint(key)
		if !ok || id >= uint64(len(c.Tokens)) {
			return NoToken, fmt.Errorf("%w: %s is not an id below %d", ErrInvalid, key, len(c.Tokens))
		}
		return int32(id), nil
	}
	var err error
	for _, s := range []struct {
		name string
		dst  *int32
	}{{"bos", &c.BOS}, {"eos", &c.EOS}, {"eot", &c.EOT}, {"eom", &c.EOM}, {"padding", &c.PAD}, {"unknown", &c.UNK}} {
		if *s.dst, err = special(s.name); err != nil {
			return nil, err
		}
	}
	// llama.cpp's defaults for SentencePiece files that name none:
	// <unk> 0, <s> 1, </s> 2.
	if c.Model == "llama" {
		for _, d := range []struct {
			dst *int32
			id  int32
		}{{&c.UNK, 0}, {&c.BOS, 1}, {&c.EOS, 2}} {
			if *d.dst == NoToken && int(d.id) < len(c.Tokens) {
				*d.dst = d.id
			}
		}
	}
	// llama.cpp's defaults for byte-level BPE files that name no BOS or EOS:
	// id 11 for both, so that token ends generation there too.
	if c.Model == "gpt2" && len(c.Tokens) > gpt2DefaultBOSEOS {
		for _, id := range []*int32{&c.BOS, &c.EOS} {
			if *id == NoToken {
				*id = gpt2DefaultBOSEOS
			}
		}
	}
	// The deprecated prefix/suffix/middle keys come after the fim_* keys
	// because llama.cpp reads them last: where a file has both, they win.
	for _, k := range []struct {
		name string
		role FIMRole
	}{
		{"fim_pre", FIMPrefix}, {"fim_suf", FIMSuffix}, {"fim_mid", FIMMiddle},
		{"fim_pad", FIMPad}, {"fim_rep", FIMRepo}, {"fim_sep", FIMFileSep},
		{"prefix", FIMPrefix}, {"suffix", FIMSuffix}, {"middle", FIMMiddle},
	} {
		id, err := special(k.name)
		if err != nil {
			return nil, err
		}
		if id != NoToken {
			if c.FIM == nil {
				c.FIM = map[FIMRole]int32{}
			}
			c.FIM[k.role] = id
		}
	}
	c.AddBOS = defaultAddBOS(c.Model, c.Pre)
	if b, ok := kv.Bool("tokenizer.ggml.add_bos_token"); ok {
		c.AddBOS = b
	}
	if c.Model == "gemma4" {
		c.AddBOS = true // llama.cpp overrides a Gemma 4 file that says otherwise
	}
	c.AddEOS, _ = kv.Bool("tokenizer.ggml.add_eos_token")
	c.AddSpacePrefix = c.Model == "llama"
	if b, ok := kv.Bool("tokenizer.ggml.add_space_prefix"); ok {
		c.AddSpacePrefix = b
	}
	name, _ := kv.String("general.name")
	name = strings.ToLower(name)
	c.RStripSpecials = strings.Contains(name, "phi-3") || strings.Contains(name, "phi3")
	return New(c)
}

// defaultAddBOS is whether llama.cpp starts prompts with BOS for a file
// without tokenizer.ggml.add_bos_token: SentencePiece vocabularies and
// Llama 3's BPE do.
func defaultAddBOS(model, pre string) bool {
	switch {
	case model == "llama":
		return true
	case model == "gpt2":
		p, err := lookupPre(pre)
		return err == nil && p.digitRun == 3 && p.ignoreMerges
	}
	return false
}

// scores reads tokenizer.ggml.scores, which llama.cpp accepts as float32 or
// int32.
func scores(kv gguf.Metadata) ([]float32, bool) {
	if f, ok := kv.Float32s("tokenizer.ggml.scores"); ok {
		return f, true
	}
	ints, ok := kv.Int32s("tokenizer.ggml.scores")
	if !ok {
		return nil, false
	}
	f := make([]float32, len(ints))
	for i, v := range ints {
		f[i] = float32(v)
	}
	return f, true
}
