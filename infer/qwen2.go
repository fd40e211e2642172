package infer

import "github.com/bonsai-chat/bonsai/gguf"

func init() {
	RegisterArch(Architecture{
		Name:        "qwen2",
		Hyperparams: func(f *gguf.File) (Hyperparams, error) { return ReadHyperparams(f, "qwen2") },
		Build:       buildQwen2,
	})
}

// qwen2 is Qwen2 and Qwen2.5 (llama.cpp's LLM_ARCH_QWEN2): qwen3's graph
// with biases on q, k and v and no q/k norms, NeoX RoPE, the output
// matrix tied to token_embd or its own. An output bias, which llama.cpp
// would add to the logits, is refused rather than left out.
func buildQwen2(f *gguf.File, b Backend, cfg BuildConfig) (Network, error) {
	hp, err := ReadHyperparams(f, "qwen2")
	if err != nil {
		return nil, err
	}
	if err := refuseTensors(f, "qwen2", "output.bias"); err != nil {
		return nil, err
	}
	return buildDense(f, b, cfg, hp, denseParts{})
}
