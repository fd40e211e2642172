package infer

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
)

func init() {
	RegisterArch(Architecture{Name: "gemma3", Hyperparams: gemma3Hyperparams, Build: buildGemma3})
}

// gemma3 is Gemma 3's text model (llama.cpp's LLM_ARCH_GEMMA3) on qwen3's
// dense graph with its parts:
//
//	x = embed(tokens)·√n_embd
//	for each layer:
//	    h = rms(x)·attn_norm
//	    q, k = rms_head(Wq·h)·q_norm, rms_head(Wk·h)·k_norm; v = Wv·h
//	    q, k = rope(q), rope(k)     (local layers: rope.freq_base_swa, unscaled)
//	    x += rms(Wo · attention(q·scale, …))·post_attention_norm
//	    h = rms(x)·ffn_norm
//	    x += rms(Wdown · (gelu(Wgate·h) ⊙ Wup·h))·post_ffw_norm
//	logits = Woutput · rms(x_last)·output_norm
//
// The norms' weights are stored with Gemma's "1 +" already added (llama.cpp's
// converter does it), so they are plain RMS norms. Five of six layers
// (llama.cpp's default pattern: layer l is global when l%6 = 5) attend
// within a sliding window of attention.sliding_window positions
// (Attn.Window), rotating by their own RoPE base without the file's
// scaling; the others attend to the whole context.
type gemmaParts struct {
	embScale  float32 // √n_embd, 0 for the other architectures
	geglu     bool    // the FFN's gate is GELU (ActGELU), not SiLU
	local     []bool  // per layer: sliding-window attention with localRope
	localRope Rope
	window    int // attention.sliding_window; 0: no window
}

// gemma3Hyperparams reads gemma3.*: the dense keys, NeoX RoPE, and the
// attention scale llama.cpp derives from the size (1/√n_embd_head, but
// 1/√(n_embd/n_head) for the 62-layer 27B).
func gemma3Hyperparams(f *gguf.File) (Hyperparams, error) {
	hp, err := ReadHyperparams(f, "gemma3")
	if err != nil {
		return hp, err
	}
	hp.AttnScale = float32(1 / math.Sqrt(float64(hp.HeadDim)))
	if hp.Layers == 62 {
		hp.AttnScale = float32(1 / math.Sqrt(float64(hp.Embed/hp.Heads)))
	}
	return hp, nil
}

func buildGemma3(f *gguf.File, b Backend, cfg BuildConfig) (Network, error) {
	hp, err := gemma3Hyperparams(f)
	if err != nil {
		return nil, err
	}
	if v, ok := f.KV.Float("gemma3.final_logit_softcapping"); ok && v != 0 {
		return nil, fmt.Errorf("%w: gemma3 with final_logit_softcapping %v", ErrUnsupportedArch, v)
	}
	g := gemmaParts{embScale: float32(math.Sqrt(float64(hp.Embed))), geglu: true}
	if w, ok := f.KV.Uint("gemma3.attention.sliding_window"); ok && w > 0 {
		if w > 1<<30 {
			return nil, fmt.Errorf("%w: gemma3.attention.sliding_window = %d", ErrBadShape, w)
		}
		g.window = int(w)
		if g.local, err = gemma3Local(f, hp.Layers); err != nil {
			return nil, err
		}
		g.localRope = hp.Rope
		g.localRope.Base, g.localRope.FreqScale = 10000, 1
		if v, ok := f.KV.Float("gemma3.rope.freq_base_swa"); ok {
			g.localRope.Base = float32(v)
		}
		if !(g.localRope.Base > 1) || math.IsInf(float64(g.localRope.Base), 0) {
			return nil, fmt.Errorf("%w: gemma3.rope.freq_base_swa = %v", ErrBadShape, g.localRope.Base)
		}
	}
	return buildDense(f, b, cfg, hp, denseParts{qkNorm: true, postNorms: true, gemma: g})
}

// gemma3Local says which layers attend within the sliding window, as
// llama.cpp's load_swa_pattern reads gemma3.attention.sliding_window_pattern:
// a per-layer array of bools, or a period n (6 without the key) whose
// last layer of each period is global (llama_hparams::set_swa_pattern;
// every layer local with n = 0).
func gemma3Local(f *gguf.File, layers int) ([]bool, error) {
	const key = "gemma3.attention.sliding_window_pattern"
	local := make([]bool, layers)
	v, ok := f.KV.Get(key)
	if perLayer, isArray := v.Any().([]bool); ok && isArray {
		if len(perLayer) != layers {
			return nil, fmt.Errorf("%w: %s holds %d layers, the model %d", ErrBadShape, key, len(perLayer), layers)
		}
		copy(local, perLayer)
		return local, nil
	}
	pattern := uint64(6)
	if ok {
		if pattern, ok = f.KV.Uint(key); !ok {
			return nil, fmt.Errorf("%w: %s = %v", ErrBadShape, key, v)
		}
	}
	for l := range local {
		local[l] = pattern == 0 || uint64(l)%pattern < pattern-1
	}
	return local, nil
}
