package infer

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Variant is what a file is, as far as bonsai cares: which Bonsai model (if
// any) and the sampling PrismML recommends for it.
type Variant struct {
	Name   string // "Bonsai-1.7B", "Ternary-Bonsai-8B", "Bonsai-2-27B", "Qwen3 (other)"
	Bonsai bool   // a PrismML Bonsai model (1-bit or ternary)
	Size   string // "1.7B", "4B", "8B", "27B"; empty when not a known shape
	// Recommended sampling (PrismML's for Bonsai); zero for other models.
	Temperature float32
	TopP        float32
	TopK        int
	Think       bool
	// family is the word a file of a familyShapes model names itself by
	// ("llama", "qwen2"): without it the name says the shape only.
	family string
}

// familyShapes are the shapes of well-known models of the other
// architectures, as their GGUF files have them (tied or not). A shape names
// a family and size, not a release: Qwen2 and Qwen2.5 share theirs, and so
// do Llama 3 and 3.1 8B.
var familyShapes = []struct {
	name, size, family string
	shape              ModelShape
}{
	{"Llama-3.2-1B", "1B", "llama", ModelShape{"llama", 16, 2048, 32, 8, 64, 8192, 128256, true, false}},
	{"Llama-3.2-3B", "3B", "llama", ModelShape{"llama", 28, 3072, 24, 8, 128, 8192, 128256, true, false}},
	{"Llama-3.1-8B", "8B", "llama", ModelShape{"llama", 32, 4096, 32, 8, 128, 14336, 128256, false, false}},
	{"TinyLlama-1.1B", "1.1B", "llama", ModelShape{"llama", 22, 2048, 32, 4, 64, 5632, 32000, false, false}},
	{"Llama-2-7B", "7B", "llama", ModelShape{"llama", 32, 4096, 32, 32, 128, 11008, 32000, false, false}},
	{"Llama-2-13B", "13B", "llama", ModelShape{"llama", 40, 5120, 40, 40, 128, 13824, 32000, false, false}},
	{"Mistral-7B", "7B", "mistral", ModelShape{"llama", 32, 4096, 32, 8, 128, 14336, 32000, false, false}},
	{"Mistral-7B-v0.3", "7B", "mistral", ModelShape{"llama", 32, 4096, 32, 8, 128, 14336, 32768, false, false}},
	{"Qwen2.5-0.5B", "0.5B", "qwen", ModelShape{"qwen2", 24, 896, 14, 2, 64, 4864, 151936, true, false}},
	{"Qwen2.5-1.5B", "1.5B", "qwen", ModelShape{"qwen2", 28, 1536, 12, 2, 128, 8960, 151936, true, false}},
	{"Qwen2.5-3B", "3B", "qwen", ModelShape{"qwen2", 36, 2048, 16, 2, 128, 11008, 151936, true, false}},
	{"Qwen2.5-7B", "7B", "qwen", ModelShape{"qwen2", 28, 3584, 28, 4, 128, 18944, 152064, false, false}},
	{"Qwen2.5-14B", "14B", "qwen", ModelShape{"qwen2", 48, 5120, 40, 8, 128, 13824, 152064, false, false}},
	{"Gemma-3-1B", "1B", "gemma", ModelShape{"gemma3", 26, 1152, 4, 1, 256, 6912, 262144, true, false}},
	{"Gemma-3-4B", "4B", "gemma", ModelShape{"gemma3", 34, 2560, 8, 4, 256, 10240, 262208, true, false}},
	{"Gemma-3-12B", "12B", "gemma", ModelShape{"gemma3", 48, 3840, 16, 8, 256, 15360, 262208, true, false}},
	{"Gemma-3-27B", "27B", "gemma", ModelShape{"gemma3", 62, 5376, 32, 16, 128, 21504, 262208, true, false}},
}

// familyVariant names a shape of familyShapes (any tying, unrotated).
func familyVariant(s ModelShape) (Variant, bool) {
	if s.Rotated {
		return Variant{}, false
	}
	for _, f := range familyShapes {
		t := s
		t.Tied = f.shape.Tied
		if t == f.shape {
			return Variant{Name: f.name, Size: f.size, family: f.family}, true
		}
	}
	return Variant{}, false
}

// ModelShape is the part of a model's hyperparameters that identifies it,
// and whether its weights are stored rotated (prism.hadamard.*, which only
// Bonsai 2 has).
type ModelShape struct {
	Arch                                               string
	Layers, Embed, Heads, KVHeads, HeadDim, FFN, Vocab int
	Tied                                               bool
	Rotated                                            bool
}

// bonsaiShapes are the Bonsai 1.x dense shapes and the 27B qwen35 shape of
// Bonsai 27B and Bonsai 2, as their GGUF files have them; the 27B's output
// may be tied or separate.
var bonsaiShapes = []struct {
	size     string
	shape    ModelShape
	anyTying bool
}{
	{"1.7B", ModelShape{"qwen3", 28, 2048, 16, 8, 128, 6144, 151936, true, false}, false},
	{"4B", ModelShape{"qwen3", 36, 2560, 32, 8, 128, 9728, 151936, true, false}, false},
	{"8B", ModelShape{"qwen3", 36, 4096, 32, 8, 128, 12288, 151936, false, false}, false},
	{"27B", ModelShape{"qwen35", 64, 5120, 24, 4, 256, 17408, 248320, false, false}, true},
}

// ClassifyVariant names a model from its shape and the types of its 2-D
// weights (type → tensor count; for qwen35 without the DeltaNet's conv
// kernel and gate projections, which every file keeps in F32 or BF16). It is
// a pure function: Bonsai when the shape is a Bonsai shape and every 2-D
// weight is Q1_0; Ternary-Bonsai when they are all 2-bit (Q2_0, its legacy
// g128 layout, or PQ2_0); Bonsai-2-27B when the 27B shape is rotated and its
// weights are PTQ1_0, PQ2_0 or Q2_0 (Bonsai 2's files and its development
// Q2_0); otherwise "<Arch> (other)". Only Bonsai 2 is rotated, and Bonsai 2
// only rotated: a PTQ1_0 file without rotation is no Bonsai file, and a
// 27B PQ2_0 one is Ternary-Bonsai-27B.
func ClassifyVariant(s ModelShape, weightTypes map[gguf.Type]int) Variant {
	other := Variant{Name: archTitle(s.Arch) + " (other)"}
	size := ""
	for _, b := range bonsaiShapes {
		t := s
		t.Rotated = false
		if b.anyTying {
			t.Tied = b.shape.Tied
		}
		if b.shape == t {
			size = b.size
		}
	}
	if size == "" {
		if v, ok := familyVariant(s); ok {
			return v
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
	if s.Arch == "qwen35" {
		// PrismML's sampling for 27B and Bonsai 2.
		v.Temperature, v.TopP, v.Think = 0.7, 0.95, true
	}
	switch {
	case s.Rotated && s.Arch == "qwen35" && allOf(gguf.PTQ1_0, gguf.PQ2_0, gguf.Q2_0):
		v.Name = "Bonsai-2-" + size
	case s.Rotated:
		other.Size = size
		return other
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
	read := func(f *gguf.File) (Hyperparams, error) { return ReadHyperparams(f, arch) }
	if a, err := LookupArch(arch); err == nil {
		read = a.Hyperparams // qwen35's counts the trunk's layers only
	}
	if hp, err := read(f); err == nil {
		s = ModelShape{arch, hp.Layers, hp.Embed, hp.Heads, hp.KVHeads, hp.HeadDim, hp.FFN, hp.Vocab, hp.TiedOutput, false}
	}
	s.Rotated = hasRotation(f)
	types := WeightTypes(f)
	if arch == "qwen35" {
		types = map[gguf.Type]int{}
		for i := range f.Tensors {
			t := &f.Tensors[i]
			if len(t.Shape) >= 2 && t.Rows() > 1 && !deltaNetSmallWeight(t.Name) {
				types[t.Type]++
			}
		}
	}
	v := ClassifyVariant(s, types)
	if v.family != "" {
		return familyOrShape(v, namedFamily(f, v.family))
	}
	return releaseOrShape(v, arch, namedBonsai(f))
}

// familyOrShape keeps a familyShapes name for a file that names itself of
// that family, and says "-shaped" otherwise (bonsai synth's random
// weights in a Llama's shape are no Llama).
func familyOrShape(v Variant, named bool) Variant {
	if !named {
		v.Name += "-shaped"
	}
	return v
}

// namedFamily reports whether f's general name, base name or file name
// contains the family's word.
func namedFamily(f *gguf.File, word string) bool {
	for _, key := range []string{"general.name", "general.basename"} {
		if v, ok := f.KV.String(key); ok && strings.Contains(strings.ToLower(v), word) {
			return true
		}
	}
	return strings.Contains(strings.ToLower(filepath.Base(f.Path)), word)
}

// releaseOrShape keeps a Bonsai classification only for a file that says
// it is Bonsai (named): a shape is not a release, and random weights in
// Bonsai's shape (bonsai synth's) are no Bonsai model and get no Bonsai
// sampling. Such a file is named by its shape: "Qwen3 (1.7B shape)".
func releaseOrShape(v Variant, arch string, named bool) Variant {
	if !v.Bonsai || named {
		return v
	}
	return Variant{Name: fmt.Sprintf("%s (%s shape)", archTitle(arch), v.Size), Size: v.Size}
}

// bonsaiName matches the names PrismML gives its releases ("Bonsai-8B",
// "Bonsai 1.7B", "Ternary-Bonsai-27B", "Bonsai-2-27B", basename "Bonsai"),
// not names that merely start with the word ("bonsai-synth", "bonsai-tiny").
var bonsaiName = regexp.MustCompile(`(?i)^(ternary[- _])?bonsai([- _]?(2[- _])?[0-9]|$)`)

// namedBonsai reports whether f says it is one of PrismML's Bonsai models:
// by its general name or file name, or by naming PrismML (prism-ml) as its
// maker or source.
func namedBonsai(f *gguf.File) bool {
	for _, key := range []string{"general.name", "general.basename"} {
		if v, ok := f.KV.String(key); ok && bonsaiName.MatchString(strings.TrimSpace(v)) {
			return true
		}
	}
	if bonsaiName.MatchString(filepath.Base(f.Path)) {
		return true
	}
	for _, key := range []string{"general.organization", "general.author", "general.url", "general.repo_url",
		"general.source.url", "general.source.huggingface.repository"} {
		if v, ok := f.KV.String(key); ok && strings.Contains(strings.ToLower(v), "prism") {
			return true
		}
	}
	return false
}

// deltaNetSmallWeight reports the Gated DeltaNet tensors that are 2-D but
// not projections of the model's type: the conv kernel and the gates' 48-wide
// projections (F32 or BF16 in every qwen35 file).
func deltaNetSmallWeight(name string) bool {
	for _, suffix := range []string{".ssm_conv1d.weight", ".ssm_alpha.weight", ".ssm_beta.weight"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
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
	case arch == "llama":
		return "Llama"
	case arch == "gemma3":
		return "Gemma3"
	}
	return arch
}
