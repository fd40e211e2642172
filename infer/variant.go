package infer

import (
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Variant is what a file is, as far as bonsai cares: which Bonsai model (if
// any) and the sampling PrismML recommends for it.
type Variant struct {
	Name   string // "Bonsai-1.7B", "Ternary-Bonsai-8B", "Qwen3 (other)"
	Bonsai bool   // a PrismML Bonsai model (1-bit or ternary)
	Size   string // "1.7B", "4B", "8B"; empty when not a known shape
	// Recommended sampling (PrismML's for Bonsai); zero for other models.
	Temperature float32
	TopP        float32
	TopK        int
	Think       bool
}

// ModelShape is the part of a model's hyperparameters that identifies it.
type ModelShape struct {
	Arch                                               string
	Layers, Embed, Heads, KVHeads, HeadDim, FFN, Vocab int
	Tied                                               bool
}

// bonsaiShapes are the Bonsai 1.x dense shapes, as their GGUF files have them.
var bonsaiShapes = []struct {
	size  string
	shape ModelShape
}{
	{"1.7B", ModelShape{"qwen3", 28, 2048, 16, 8, 128, 6144, 151936, true}},
	{"4B", ModelShape{"qwen3", 36, 2560, 32, 8, 128, 9728, 151936, true}},
	{"8B", ModelShape{"qwen3", 36, 4096, 32, 8, 128, 12288, 151936, false}},
}

// ClassifyVariant names a model from its shape and the types of its 2-D
// weights (type → tensor count). It is a pure function: Bonsai when the
// shape is one of the Bonsai 1.x shapes and every 2-D weight is Q1_0;
// Ternary-Bonsai when they are all 2-bit (Q2_0, its legacy g128 layout or
// PQ2_0); otherwise "<Arch> (other)".
func ClassifyVariant(s ModelShape, weightTypes map[gguf.Type]int) Variant {
	other := Variant{Name: archTitle(s.Arch) + " (other)"}
	size := ""
	for _, b := range bonsaiShapes {
		if b.shape == s {
			size = b.size
		}
	}
	if size == "" || len(weightTypes) == 0 {
		return other
	}
	allOf := func(types ...gguf.Type) bool {
		for t := range weightTypes {
			found := false
			for _, want := range types {
				found = found || t == want
			}
			if !found {
				return false
			}
		}
		return true
	}
	v := Variant{Bonsai: true, Size: size, Temperature: 0.5, TopP: 0.85, TopK: 20}
	switch {
	case allOf(gguf.Q1_0):
		v.Name = "Bonsai-" + size
	case allOf(gguf.Q2_0, gguf.Q2_0G128, gguf.PQ2_0):
		v.Name = "Ternary-Bonsai-" + size
	default:
		other.Size = size
		return other
	}
	return v
}

// DetectVariant classifies the model in f (see ClassifyVariant).
func DetectVariant(f *gguf.File) Variant {
	arch, err := ArchOf(f)
	if err != nil {
		return Variant{Name: "unknown (no general.architecture)"}
	}
	s := ModelShape{Arch: arch}
	if hp, err := ReadHyperparams(f, arch); err == nil {
		s = ModelShape{arch, hp.Layers, hp.Embed, hp.Heads, hp.KVHeads, hp.HeadDim, hp.FFN, hp.Vocab, hp.TiedOutput}
	}
	return ClassifyVariant(s, WeightTypes(f))
}

// WeightTypes counts the tensor types of f's 2-D (matrix) weights.
func WeightTypes(f *gguf.File) map[gguf.Type]int {
	types := map[gguf.Type]int{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if len(t.Shape) >= 2 && t.Rows() > 1 {
			types[t.Type]++
		}
	}
	return types
}

func archTitle(arch string) string {
	switch {
	case arch == "":
		return "unknown"
	case strings.HasPrefix(arch, "qwen"):
		return "Qwen" + arch[len("qwen"):]
	}
	return arch
}
