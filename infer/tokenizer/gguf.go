package tokenizer

import (
	"fmt"

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
	}{{"bos", &c.BOS}, {"eos", &c.EOS}, {"eot", &c.EOT}, {"eom", &c.EOM}, {"padding", &c.PAD}} {
		if *s.dst, err = special(s.name); err != nil {
			return nil, err
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
	c.AddBOS, _ = kv.Bool("tokenizer.ggml.add_bos_token")
	return New(c)
}
