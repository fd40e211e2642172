// Package tinymodel builds very small random Qwen3 GGUF files in memory for
// unit tests of the forward pass, the backends and the engine. Its weights
// are seeded, so a test's model is the same on every run.
package tinymodel

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/infer/tokenizer/qwen"
)

// Config is the model's shape and weight type.
type Config struct {
	Layers, Embed, Heads, KVHeads, HeadDim, FFN, Vocab, Context int
	Type                                                        gguf.Type // 2-D weights; norms are F32
	Tied                                                        bool
	Seed                                                        uint64
	RopeBase                                                    float64
	// Yarn sets rope.scaling.type = yarn with this factor (0: none).
	Yarn        float64
	YarnOrigCtx int
	// Extra metadata (tokenizer keys, for instance).
	Extra map[string]any
}

// Small is a 2-layer model whose widths suit every block size up to 256.
func Small(t gguf.Type) Config {
	return Config{Layers: 2, Embed: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 512, Vocab: 96,
		Context: 512, Type: t, Tied: true, Seed: 1, RopeBase: 1e6}
}

// Build returns the GGUF bytes of a model with cfg's shape.
func Build(cfg Config) ([]byte, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7e57))
	w := gguf.NewWriter()
	w.Set("general.architecture", "qwen3")
	w.Set("general.name", "tiny-test")
	w.Set("qwen3.block_count", uint32(cfg.Layers))
	w.Set("qwen3.context_length", uint32(cfg.Context))
	w.Set("qwen3.embedding_length", uint32(cfg.Embed))
	w.Set("qwen3.feed_forward_length", uint32(cfg.FFN))
	w.Set("qwen3.attention.head_count", uint32(cfg.Heads))
	w.Set("qwen3.attention.head_count_kv", uint32(cfg.KVHeads))
	w.Set("qwen3.attention.key_length", uint32(cfg.HeadDim))
	w.Set("qwen3.attention.value_length", uint32(cfg.HeadDim))
	w.Set("qwen3.attention.layer_norm_rms_epsilon", float32(1e-6))
	w.Set("qwen3.rope.freq_base", float32(cfg.RopeBase))
	if cfg.Yarn != 0 {
		w.Set("qwen3.rope.scaling.type", "yarn")
		w.Set("qwen3.rope.scaling.factor", float32(cfg.Yarn))
		w.Set("qwen3.rope.scaling.original_context_length", uint32(cfg.YarnOrigCtx))
	}
	for k, v := range cfg.Extra {
		w.Set(k, v)
	}

	E, F, V := cfg.Embed, cfg.FFN, cfg.Vocab
	q, kv := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	add := func(name string, typ gguf.Type, cols, rows int, std float64, mean float64) error {
		vals := make([]float32, cols*rows)
		for i := range vals {
			vals[i] = float32(mean + std*rng.NormFloat64())
		}
		rb, err := typ.RowBytes(int64(cols))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		data := make([]byte, int(rb)*rows)
		for r := range rows {
			if err := quant.QuantizeRow(typ, vals[r*cols:(r+1)*cols], data[r*int(rb):(r+1)*int(rb)]); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		shape := []int64{int64(cols)}
		if rows > 1 {
			shape = append(shape, int64(rows))
		}
		return w.AddTensor(name, typ, shape, data)
	}
	mat := func(name string, in, out int) error {
		return add(name, cfg.Type, in, out, 1/math.Sqrt(float64(in)), 0)
	}
	norm := func(name string, n int) error { return add(name, gguf.F32, n, 1, 0.1, 1) }

	// Small embeddings (RMS 2/√E) next to what the layers add, so a tied
	// model does not just predict its input token; the output norm's mean
	// then spreads the logits to a standard deviation of about 8, so greedy
	// choices are clear.
	embStd, outStd := 2/math.Sqrt(float64(E)), 1/math.Sqrt(float64(E))
	if cfg.Tied {
		outStd = embStd
	}
	gain := 8 / (outStd * math.Sqrt(float64(E)))
	steps := []func() error{
		func() error { return add("token_embd.weight", cfg.Type, E, V, embStd, 0) },
		func() error { return add("output_norm.weight", gguf.F32, E, 1, 0.1*gain, gain) },
	}
	if !cfg.Tied {
		steps = append(steps, func() error { return add("output.weight", cfg.Type, E, V, outStd, 0) })
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		steps = append(steps,
			func() error { return norm(p+"attn_norm.weight", E) },
			func() error { return mat(p+"attn_q.weight", E, q) },
			func() error { return mat(p+"attn_k.weight", E, kv) },
			func() error { return mat(p+"attn_v.weight", E, kv) },
			func() error { return norm(p+"attn_q_norm.weight", cfg.HeadDim) },
			func() error { return norm(p+"attn_k_norm.weight", cfg.HeadDim) },
			func() error { return mat(p+"attn_output.weight", q, E) },
			func() error { return norm(p+"ffn_norm.weight", E) },
			func() error { return mat(p+"ffn_gate.weight", E, F) },
			func() error { return mat(p+"ffn_up.weight", E, F) },
			func() error { return mat(p+"ffn_down.weight", F, E) },
		)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Open builds the model and parses it.
func Open(cfg Config) (*gguf.File, error) {
	data, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	return gguf.Parse(data)
}

// WithQwenTokenizer gives cfg the real Qwen3 tokenizer (and its vocabulary
// size), so that engines and commands can chat with the model.
func WithQwenTokenizer(cfg Config) (Config, error) {
	v, err := qwen.Qwen3Vocab()
	if err != nil {
		return cfg, err
	}
	cfg.Vocab = len(v.Tokens)
	extra := map[string]any{
		"tokenizer.ggml.model":            v.Model,
		"tokenizer.ggml.pre":              v.Pre,
		"tokenizer.ggml.tokens":           v.Tokens,
		"tokenizer.ggml.token_type":       v.Types,
		"tokenizer.ggml.merges":           v.Merges,
		"tokenizer.ggml.bos_token_id":     uint32(qwen.BOS),
		"tokenizer.ggml.eos_token_id":     uint32(qwen.EOS),
		"tokenizer.ggml.padding_token_id": uint32(qwen.PAD),
		"tokenizer.ggml.add_bos_token":    false,
	}
	if cfg.Extra == nil {
		cfg.Extra = map[string]any{}
	}
	for k, val := range extra {
		cfg.Extra[k] = val
	}
	return cfg, nil
}
