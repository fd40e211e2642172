package infer

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Hyperparams are a dense transformer's sizes, read from the `ARCH.*`
// metadata keys, never from file names.
type Hyperparams struct {
	Arch         string
	Layers       int // block_count
	KVLayers     int // layers with a KV cache (qwen35: the attention layers); 0 means all
	ContextTrain int // context_length
	Embed        int // embedding_length
	FFN          int // feed_forward_length
	Heads        int // attention.head_count
	KVHeads      int // attention.head_count_kv
	HeadDim      int // attention.key_length (embedding_length/head_count when absent)
	ValueDim     int // attention.value_length
	RMSEps       float32
	Vocab        int // rows of token_embd.weight
	TiedOutput   bool
	Rope         Rope
	// AttnScale is attention.scale, the attention's kq_scale where the file
	// sets one; 0 means 1/sqrt(HeadDim).
	AttnScale float32
}

// ReadHyperparams reads the dense-transformer keys of arch from f's metadata
// and the vocabulary size and output tying from its tensors.
func ReadHyperparams(f *gguf.File, arch string) (Hyperparams, error) {
	kv := f.KV
	h := Hyperparams{Arch: arch}
	need := func(dst *int, key string) error {
		v, ok := kv.Uint(arch + "." + key)
		if !ok {
			return fmt.Errorf("%w: %s.%s", gguf.ErrNoKey, arch, key)
		}
		if v == 0 || v > 1<<30 {
			return fmt.Errorf("%w: %s.%s = %d", ErrBadShape, arch, key, v)
		}
		*dst = int(v)
		return nil
	}
	for _, k := range []struct {
		dst *int
		key string
	}{
		{&h.Layers, "block_count"},
		{&h.ContextTrain, "context_length"},
		{&h.Embed, "embedding_length"},
		{&h.FFN, "feed_forward_length"},
		{&h.Heads, "attention.head_count"},
	} {
		if err := need(k.dst, k.key); err != nil {
			return h, err
		}
	}
	h.KVHeads = h.Heads
	if _, ok := kv.Uint(arch + ".attention.head_count_kv"); ok {
		if err := need(&h.KVHeads, "attention.head_count_kv"); err != nil {
			return h, err
		}
	}
	if h.Heads%h.KVHeads != 0 {
		return h, fmt.Errorf("%w: %d heads is not a multiple of %d kv heads", ErrBadShape, h.Heads, h.KVHeads)
	}
	h.HeadDim = h.Embed / h.Heads
	if _, ok := kv.Uint(arch + ".attention.key_length"); ok {
		if err := need(&h.HeadDim, "attention.key_length"); err != nil {
			return h, err
		}
	}
	h.ValueDim = h.HeadDim
	if _, ok := kv.Uint(arch + ".attention.value_length"); ok {
		if err := need(&h.ValueDim, "attention.value_length"); err != nil {
			return h, err
		}
	}
	if h.ValueDim != h.HeadDim {
		return h, fmt.Errorf("%w: value_length %d differs from key_length %d", ErrBadShape, h.ValueDim, h.HeadDim)
	}
	if h.HeadDim%2 != 0 {
		return h, fmt.Errorf("%w: odd head dimension %d cannot be rotated", ErrBadShape, h.HeadDim)
	}
	h.RMSEps = 1e-6
	if v, ok := kv.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		h.RMSEps = float32(v)
	}

	embd, ok := f.Tensor("token_embd.weight")
	if !ok {
		return h, fmt.Errorf("%w: token_embd.weight", ErrMissingTensor)
	}
	if len(embd.Shape) != 2 || embd.Shape[0] != int64(h.Embed) {
		return h, fmt.Errorf("%w: token_embd.weight is %v, want [%d, vocab]", ErrBadShape, embd.Shape, h.Embed)
	}
	h.Vocab = int(embd.Shape[1])
	_, hasOutput := f.Tensor("output.weight")
	h.TiedOutput = !hasOutput

	rope, err := readRope(kv, arch, h)
	if err != nil {
		return h, err
	}
	h.Rope = rope
	return h, nil
}

// readRope follows llama.cpp (v0.5.0's llama-model.cpp and llama-context.cpp):
// freq_base defaults to 10000; the scaling type to "linear"; the factor
// (rope.scaling.factor, or the older rope.scale_linear) sets freq_scale =
// 1/factor unless the type is "none"; YaRN sets ext_factor 1 and an
// attention factor that cancels the magnitude rope_yarn adds, times
// rope.scaling.attn_factor; beta_fast 32, beta_slow 1.
func readRope(kv gguf.Metadata, arch string, h Hyperparams) (Rope, error) {
	r := Rope{
		HeadDim: h.HeadDim, Dims: h.HeadDim,
		Base: 10000, FreqScale: 1, AttnFactor: 1,
		BetaFast: 32, BetaSlow: 1,
		OrigContext: h.ContextTrain,
	}
	key := func(k string) string { return arch + "." + k }
	if n, ok := kv.Uint(key("rope.dimension_count")); ok {
		if n == 0 || n > uint64(h.HeadDim) || n%2 != 0 {
			return r, fmt.Errorf("%w: %s = %d for head dimension %d", ErrBadShape, key("rope.dimension_count"), n, h.HeadDim)
		}
		r.Dims = int(n)
	}
	if v, ok := kv.Float(key("rope.freq_base")); ok {
		r.Base = float32(v)
	}
	if !(r.Base > 1) || math.IsInf(float64(r.Base), 0) {
		return r, fmt.Errorf("%w: %s = %v", ErrBadShape, key("rope.freq_base"), r.Base)
	}
	kind := "linear"
	if v, ok := kv.String(key("rope.scaling.type")); ok {
		kind = v
	}
	switch kind {
	case "none", "linear", "yarn":
	default:
		return r, fmt.Errorf("%w: %s %q is not supported (none, linear, yarn)", ErrUnsupportedArch, key("rope.scaling.type"), kind)
	}
	factor, ok := kv.Float(key("rope.scaling.factor"))
	if !ok {
		factor, _ = kv.Float(key("rope.scale_linear"))
	}
	if factor < 0 || math.IsInf(factor, 0) || math.IsNaN(factor) {
		return r, fmt.Errorf("%w: %s = %v", ErrBadShape, key("rope.scaling.factor"), factor)
	}
	if factor != 0 && kind != "none" {
		r.FreqScale = 1 / float32(factor)
	}
	if n, ok := kv.Uint(key("rope.scaling.original_context_length")); ok && n > 0 {
		r.OrigContext = int(n)
	}
	if kind == "yarn" {
		r.ExtFactor = 1
		f := 1 / r.FreqScale
		logMul, _ := kv.Float(key("rope.scaling.yarn_log_multiplier"))
		if logMul != 0 {
			r.AttnFactor = yarnMscale(f, 1) / yarnMscale(f, float32(logMul))
		} else {
			r.AttnFactor = yarnMscale(f, 1)
		}
		r.AttnFactor *= 1 / (1 + 0.1*logf(f))
	}
	if v, ok := kv.Float(key("rope.scaling.attn_factor")); ok {
		r.AttnFactor *= float32(v)
	}
	return r, nil
}

// yarnMscale is llama.cpp's get_mscale.
func yarnMscale(scale, mscale float32) float32 {
	if scale <= 1 {
		return 1
	}
	return 0.1*mscale*logf(scale) + 1
}

// Params counts the model's weights: the elements of all its tensors.
func Params(f *gguf.File) int64 {
	var n int64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	return n
}
