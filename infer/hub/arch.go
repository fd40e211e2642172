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
}

// Arch is the model's general.architecture ("qwen3", "qwen35"), as
// published; "" for a model outside the registry.
func (m Model) Arch() string { return registryFiles[m.Name].arch }

// Types are the tensor types of the model's file, as published; nil for a
// model outside the registry.
func (m Model) Types() []gguf.Type { return registryFiles[m.Name].types }
