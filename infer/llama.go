package infer

import (
	"fmt"
	"math"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

func init() {
	RegisterArch(Architecture{Name: "llama", Hyperparams: llamaHyperparams, Build: buildLlama})
}

// llama is Llama 2 and 3.x, TinyLlama and Mistral 7B (llama.cpp's
// LLM_ARCH_LLAMA): qwen3's graph without the q/k norms, RoPE rotating
// adjacent pairs (LLAMA_ROPE_TYPE_NORM), Llama 3's frequency factors
// (rope_freqs.weight) where the file has them, grouped-query attention
// and an output matrix that is token_embd's when the file has none. The
// biases llama.cpp also takes for this architecture are taken for q, k
// and v; a file with others (the attention output's, the FFN's) or with
// experts (Mixtral) is refused rather than run without them.
func buildLlama(f *gguf.File, b Backend, cfg BuildConfig) (Network, error) {
	hp, err := llamaHyperparams(f)
	if err != nil {
		return nil, err
	}
	if err := refuseTensors(f, "llama", ".attn_output.bias", ".ffn_gate.bias", ".ffn_up.bias", ".ffn_down.bias"); err != nil {
		return nil, err
	}
	if hp.Rope.Factors, err = ropeFactors(f, hp.Rope); err != nil {
		return nil, err
	}
	return buildDense(f, b, cfg, hp, denseParts{})
}

// llamaHyperparams reads llama.* (llama.cpp's hparams for LLM_ARCH_LLAMA):
// the dense keys, the normal RoPE mode, and attention.scale where set.
func llamaHyperparams(f *gguf.File) (Hyperparams, error) {
	hp, err := ReadHyperparams(f, "llama")
	if err != nil {
		return hp, err
	}
	if n, ok := f.KV.Uint("llama.expert_count"); ok && n > 0 {
		return hp, fmt.Errorf("%w: llama with %d experts (mixture of experts)", ErrUnsupportedArch, n)
	}
	hp.Rope.Mode = RopeNormal
	if v, ok := f.KV.Float("llama.attention.scale"); ok && v != 0 {
		if !(v > 0) || math.IsInf(v, 0) {
			return hp, fmt.Errorf("%w: llama.attention.scale = %v", ErrBadShape, v)
		}
		hp.AttnScale = float32(v)
	}
	return hp, nil
}

// ropeFactors reads rope_freqs.weight, the Dims/2 divisors of the pairs'
// angles that Llama 3's llama3 scaling becomes in a GGUF file (llama.cpp
// binds it to every layer and passes it to ggml_rope_ext); nil when the
// file has none.
func ropeFactors(f *gguf.File, r Rope) (*FreqFactors, error) {
	t, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		return nil, nil
	}
	half := int64(r.Dims / 2)
	if t.Type != gguf.F32 || !equalShape(t.Shape, []int64{half}) {
		return nil, fmt.Errorf("%w: rope_freqs.weight is %s %v, want F32 [%d]", ErrBadShape, t.Type, t.Shape, half)
	}
	data := f.Data(t)
	if int64(len(data)) != 4*half {
		return nil, fmt.Errorf("%w: rope_freqs.weight: no data (file closed or out of range)", ErrMissingTensor)
	}
	v := make([]float32, half)
	for i := range v {
		v[i] = math.Float32frombits(uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24)
		if !(v[i] > 0) || math.IsInf(float64(v[i]), 0) {
			return nil, fmt.Errorf("%w: rope_freqs.weight[%d] = %v, want a positive factor", ErrBadShape, i, v[i])
		}
	}
	return &FreqFactors{Values: v}, nil
}

// refuseTensors fails when f has a tensor whose name ends in one of
// suffixes: weights the architecture's graph would take that bonsai's does
// not, which running without would answer wrongly.
func refuseTensors(f *gguf.File, arch string, suffixes ...string) error {
	for i := range f.Tensors {
		name := f.Tensors[i].Name
		for _, s := range suffixes {
			if strings.HasSuffix(name, s) {
				return fmt.Errorf("%w: %s with %s (not supported yet)", ErrUnsupportedArch, arch, name)
			}
		}
	}
	return nil
}
