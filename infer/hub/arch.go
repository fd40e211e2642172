package hub

import "github.com/bonsai-chat/bonsai/gguf"

// published is what a registry entry's file holds, as published: its
// architecture (general.architecture) and the types of its tensors, so
// that front ends can tell which entries the build runs without
// downloading them.
type published struct {
	arch  string
	types []gguf.Type
}

var (
	q1 = published{"qwen3", []gguf.Type{gguf.Q1_0, gguf.F32}}
	q2 = published{"qwen3", []gguf.Type{gguf.Q2_0, gguf.F32}}
)

// hybrid is a qwen35 file whose weights are t, norms F32 and, in Bonsai 2,
// the gates' projections BF16.
func hybrid(t gguf.Type) published {
	types := []gguf.Type{t, gguf.F32}
	if t == gguf.PTQ1_0 || t == gguf.PQ2_0 {
		types = append(types, gguf.BF16)
	}
	return published{"qwen35", types}
}

// kquant is a llama.cpp Q4_K_M file of arch: Q4_K, Q6_K for the output and
// half of attn_v and ffn_down, F32 norms; rows whose length is not a
// multiple of 256 fall back to Q5_0 (for Q4_K) and Q8_0 (for Q6_K), as
// Gemma 3 1B's 1,152-wide ones do.
func kquant(arch string, fallback ...gguf.Type) published {
	return published{arch, append([]gguf.Type{gguf.Q4_K, gguf.Q6_K, gguf.F32}, fallback...)}
}

var registryFiles = map[string]published{
	"bonsai-1.7b":         q1,
	"bonsai-4b":           q1,
	"bonsai-8b":           q1,
	"bonsai-27b":          hybrid(gguf.Q1_0),
	"ternary-bonsai-1.7b": q2,
	"ternary-bonsai-4b":   q2,
	"ternary-bonsai-8b":   q2,
	"ternary-bonsai-27b":  hybrid(gguf.Q2_0),
	"bonsai-2-27b":        hybrid(gguf.PQ2_0),
	"bonsai-2-27b-ptq1_0": hybrid(gguf.PTQ1_0),
	"llama-3.2-1b":        kquant("llama"),
	"llama-3.2-3b":        kquant("llama"),
	"qwen2.5-1.5b":        kquant("qwen2"),
	"gemma-3-1b":          kquant("gemma3", gguf.Q5_0, gguf.Q8_0),
	"mistral-7b":          kquant("llama"),
	"tinyllama-1.1b":      kquant("llama"),
}

// Arch is the model's general.architecture ("qwen3", "qwen35"), as
// published; "" for a model outside the registry.
func (m Model) Arch() string { return registryFiles[m.Name].arch }

// Types are the tensor types of the model's file, as published; nil for a
// model outside the registry.
func (m Model) Types() []gguf.Type { return registryFiles[m.Name].types }
