package synth

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// Shape is the architecture of a model: everything the generator needs to
// lay out its tensors. Arch is "qwen3" (Bonsai 1.x, the default when empty)
// or "qwen35" (Bonsai 27B and Bonsai 2), whose extra sizes are in Hybrid.
type Shape struct {
	Name      string
	Arch      string
	Layers    int
	Hidden    int // embedding length
	Heads     int
	KVHeads   int
	HeadDim   int // attention.key_length = value_length
	FFN       int // feed_forward_length
	Vocab     int // token_embd rows
	Tied      bool
	Context   int
	RopeTheta float64
	RMSEps    float64
	// RowSpread is the spread of the output rows' log-scales (see plan);
	// 0 means outputRowSpread.
	RowSpread float64
	Hybrid    Hybrid // qwen35 only
	// Llama3 is Llama 3's RoPE scaling, written as rope_freqs.weight
	// (llama only; nil for none).
	Llama3 *Llama3Rope
	// Window is gemma3's attention.sliding_window (five of six layers
	// attend within it).
	Window int
}

// Llama3Rope is the llama3 rope_scaling of a Llama 3.x config.json, which
// llama.cpp's converter turns into one frequency factor per pair.
type Llama3Rope struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OrigContext                           int
}

// factors are the converter's rope_freqs for head dimension dim and base
// theta: 1 for wavelengths below OrigContext/HighFreqFactor, Factor above
// OrigContext/LowFreqFactor, a smooth mix between.
func (r Llama3Rope) factors(dim int, theta float64) []float32 {
	out := make([]float32, dim/2)
	low := float64(r.OrigContext) / r.LowFreqFactor
	high := float64(r.OrigContext) / r.HighFreqFactor
	for i := range out {
		// float32 as torch computes the frequencies
		freq := float64(float32(1 / math.Pow(theta, float64(2*i)/float64(dim))))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < high:
			out[i] = 1
		case wavelen > low:
			out[i] = float32(r.Factor)
		default:
			smooth := (float64(r.OrigContext)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/r.Factor + smooth))
		}
	}
	return out
}

// Hybrid holds the sizes of a qwen35 model beyond the dense ones: every
// AttnInterval-th layer is gated full attention, the others Gated DeltaNet.
type Hybrid struct {
	RopeDims     int    // rope.dimension_count: the rotated dims of each head
	Sections     [4]int // rope.dimension_sections (IMROPE), summing to RopeDims/2
	AttnInterval int    // full_attention_interval
	ConvKernel   int    // ssm.conv_kernel
	StateSize    int    // ssm.state_size: DeltaNet head dimension
	KHeads       int    // ssm.group_count
	VHeads       int    // ssm.time_step_rank
}

// arch is the general.architecture the shape writes.
func (s Shape) arch() string {
	if s.Arch == "" {
		return "qwen3"
	}
	return s.Arch
}

func (s Shape) hybrid() bool { return s.arch() == "qwen35" }

// qkNorm says the attention norms q and k per head (qwen3, qwen35, gemma3).
func (s Shape) qkNorm() bool { return s.arch() == "qwen3" || s.hybrid() || s.arch() == "gemma3" }

// attention reports whether layer i is a full-attention layer.
func (s Shape) attention(i int) bool {
	return !s.hybrid() || (i+1)%s.Hybrid.AttnInterval == 0
}

// ErrUnknownShape is returned for a shape name outside Shapes.
var ErrUnknownShape = errors.New("unknown model shape")

// ErrUnknownArch is returned for an architecture the generator cannot write.
var ErrUnknownArch = errors.New("unknown architecture")

// Shapes are the real Bonsai 1.x shapes (as their GGUF files have them) plus tiny, a
// model of the same structure small enough for unit tests. tiny's widths
// are multiples of 256 so every type, K-quants included, can store it.
var Shapes = map[string]Shape{
	"tiny": {Name: "tiny", Layers: 2, Hidden: 256, Heads: 2, KVHeads: 1, HeadDim: 128, FFN: 512,
		Vocab: qwenVocab, Tied: true, Context: 4096, RopeTheta: 1e6, RMSEps: 1e-6},
	"1.7b": {Name: "1.7b", Layers: 28, Hidden: 2048, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 6144,
		Vocab: qwenVocab, Tied: true, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6},
	"4b": {Name: "4b", Layers: 36, Hidden: 2560, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 9728,
		Vocab: qwenVocab, Tied: true, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6},
	"8b": {Name: "8b", Layers: 36, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 12288,
		Vocab: qwenVocab, Tied: false, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6},
}

// Qwen35Shapes are the qwen35 shapes: 27b is Bonsai 27B's and Bonsai 2's
// (as their GGUF files have them), tiny the same structure small enough for tests, with
// two attention layers among six, fewer K heads than V heads and partial
// RoPE.
var Qwen35Shapes = map[string]Shape{
	"tiny": {Name: "tiny", Arch: "qwen35", Layers: 6, Hidden: 256, Heads: 2, KVHeads: 1, HeadDim: 128, FFN: 512,
		Vocab: qwenVocab, Tied: true, Context: 4096, RopeTheta: 1e7, RMSEps: 1e-6, RowSpread: hybridRowSpread,
		Hybrid: Hybrid{RopeDims: 32, Sections: [4]int{6, 5, 5, 0}, AttnInterval: 3, ConvKernel: 4,
			StateSize: 64, KHeads: 2, VHeads: 4}},
	"27b": {Name: "27b", Arch: "qwen35", Layers: 64, Hidden: 5120, Heads: 24, KVHeads: 4, HeadDim: 256, FFN: 17408,
		Vocab: qwen35Vocab, Tied: false, Context: 262144, RopeTheta: 1e7, RMSEps: 1e-6, RowSpread: hybridRowSpread,
		Hybrid: Hybrid{RopeDims: 64, Sections: [4]int{11, 11, 10, 0}, AttnInterval: 4, ConvKernel: 4,
			StateSize: 128, KHeads: 16, VHeads: 48}},
}

// hybridRowSpread is the qwen35 shapes' output row spread, twice qwen3's:
// the deeper hybrid stack spreads its logits less, and with 0.3 a greedy
// run of 48 steps had 5–11 steps within 2ε·(|logit|+1) of a tie (Q8_0's ε)
// against 3–4 with 0.6, while the continuations stay varied (1.0 made some
// seeds repeat one token).
const hybridRowSpread = 0.6

// llama3Scaling are Llama 3.2's (factor 32) and Llama 3.1's (factor 8)
// rope_scaling.
var (
	llama32Scaling = &Llama3Rope{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}
	llama31Scaling = &Llama3Rope{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigContext: 8192}
)

// LlamaShapes are llama shapes as their GGUF files have them: Llama 3.2 1B
// and 3B, Llama 3.1 8B, TinyLlama 1.1B, Llama 2 7B and Mistral 7B (v0.2),
// and tiny, Llama 3's structure (GQA, rope_freqs) small enough for tests.
// Every one carries Llama 3's tokenizer, cut to the shape's vocab where
// that is smaller (the 32,000 of Llama 2's SentencePiece).
var LlamaShapes = map[string]Shape{
	"tiny": {Name: "tiny", Arch: "llama", Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 512,
		Vocab: llama3Vocab, Tied: true, Context: 4096, RopeTheta: 5e5, RMSEps: 1e-5, Llama3: llama32Scaling},
	"1b": {Name: "1b", Arch: "llama", Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192,
		Vocab: llama3Vocab, Tied: true, Context: 131072, RopeTheta: 5e5, RMSEps: 1e-5, Llama3: llama32Scaling},
	"3b": {Name: "3b", Arch: "llama", Layers: 28, Hidden: 3072, Heads: 24, KVHeads: 8, HeadDim: 128, FFN: 8192,
		Vocab: llama3Vocab, Tied: true, Context: 131072, RopeTheta: 5e5, RMSEps: 1e-5, Llama3: llama32Scaling},
	"8b": {Name: "8b", Arch: "llama", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Vocab: llama3Vocab, Context: 131072, RopeTheta: 5e5, RMSEps: 1e-5, Llama3: llama31Scaling},
	"tinyllama-1.1b": {Name: "tinyllama-1.1b", Arch: "llama", Layers: 22, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 64, FFN: 5632,
		Vocab: 32000, Context: 2048, RopeTheta: 1e4, RMSEps: 1e-5},
	"llama2-7b": {Name: "llama2-7b", Arch: "llama", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128, FFN: 11008,
		Vocab: 32000, Context: 4096, RopeTheta: 1e4, RMSEps: 1e-5},
	"mistral-7b": {Name: "mistral-7b", Arch: "llama", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
		Vocab: 32000, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-5},
}

// Qwen2Shapes are Qwen2.5's shapes as their GGUF files have them, and tiny,
// the same structure (q/k/v biases, GQA) small enough for tests. 0.5b's
// widths (896) are no multiple of 256: K-quants cannot store it.
var Qwen2Shapes = map[string]Shape{
	"tiny": {Name: "tiny", Arch: "qwen2", Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 512,
		Vocab: qwenVocab, Tied: true, Context: 4096, RopeTheta: 1e6, RMSEps: 1e-6},
	"0.5b": {Name: "0.5b", Arch: "qwen2", Layers: 24, Hidden: 896, Heads: 14, KVHeads: 2, HeadDim: 64, FFN: 4864,
		Vocab: qwenVocab, Tied: true, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6},
	"1.5b": {Name: "1.5b", Arch: "qwen2", Layers: 28, Hidden: 1536, Heads: 12, KVHeads: 2, HeadDim: 128, FFN: 8960,
		Vocab: qwenVocab, Tied: true, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6},
	"7b": {Name: "7b", Arch: "qwen2", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128, FFN: 18944,
		Vocab: 152064, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6},
}

// Gemma3Shapes are Gemma 3's text shapes as their GGUF files have them
// (1b; its 1152 wide rows are no multiple of 256: K-quants cannot store
// it), and tiny, six layers (five local, one global) small enough for
// tests. They carry Qwen's tokenizer, padded to Gemma's vocab size, not
// Gemma's SentencePiece one.
var Gemma3Shapes = map[string]Shape{
	"tiny": {Name: "tiny", Arch: "gemma3", Layers: 6, Hidden: 256, Heads: 4, KVHeads: 1, HeadDim: 64, FFN: 512,
		Vocab: qwenVocab, Tied: true, Context: 4096, RopeTheta: 1e6, RMSEps: 1e-6, Window: 512},
	"1b": {Name: "1b", Arch: "gemma3", Layers: 26, Hidden: 1152, Heads: 4, KVHeads: 1, HeadDim: 256, FFN: 6912,
		Vocab: gemma3Vocab, Tied: true, Context: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Window: 512},
}

// archShapes are the shape tables by architecture.
var archShapes = map[string]map[string]Shape{"qwen3": Shapes, "qwen35": Qwen35Shapes, "llama": LlamaShapes, "qwen2": Qwen2Shapes,
	"gemma3": Gemma3Shapes}

// ShapeNames lists the qwen3 shape names, smallest model first.
func ShapeNames() []string { return shapeNames(Shapes) }

func shapeNames(shapes map[string]Shape) []string {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return shapes[names[i]].params() < shapes[names[j]].params() })
	return names
}

// ShapeByName looks a qwen3 shape up by its name ("tiny", "1.7b", "4b", "8b").
func ShapeByName(name string) (Shape, error) { return ArchShape("qwen3", name) }

// ArchShape looks a shape of an architecture ("qwen3", "qwen35", "qwen2",
// "llama") up by name.
func ArchShape(arch, name string) (Shape, error) {
	shapes, ok := archShapes[strings.ToLower(arch)]
	if !ok {
		return Shape{}, fmt.Errorf("%w %q (want qwen3, qwen35, qwen2, llama or gemma3)", ErrUnknownArch, arch)
	}
	s, ok := shapes[strings.ToLower(name)]
	if !ok {
		return Shape{}, fmt.Errorf("%w %q for %s (want one of %s)", ErrUnknownShape, name, arch, strings.Join(shapeNames(shapes), ", "))
	}
	return s, nil
}

// Validate checks that the shape describes a model llama.cpp would load.
func (s Shape) Validate() error {
	switch {
	case s.Layers < 1:
		return fmt.Errorf("synth: shape %s: %d layers, need at least 1", s.Name, s.Layers)
	case s.Hidden < 1 || s.Heads < 1 || s.KVHeads < 1 || s.HeadDim < 1 || s.FFN < 1:
		return fmt.Errorf("synth: shape %s: widths must be positive", s.Name)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("synth: shape %s: %d heads is not a multiple of %d kv heads", s.Name, s.Heads, s.KVHeads)
	case s.HeadDim%2 != 0:
		return fmt.Errorf("synth: shape %s: head dim %d is odd (RoPE rotates pairs)", s.Name, s.HeadDim)
	case s.Vocab < minVocab || s.Vocab > maxVocab:
		return fmt.Errorf("synth: shape %s: vocab %d outside [%d, %d]", s.Name, s.Vocab, minVocab, maxVocab)
	case s.Context < 1:
		return fmt.Errorf("synth: shape %s: context %d", s.Name, s.Context)
	case archShapes[s.arch()] == nil:
		return fmt.Errorf("synth: shape %s: %w %q", s.Name, ErrUnknownArch, s.Arch)
	case s.Llama3 != nil && s.arch() != "llama":
		return fmt.Errorf("synth: shape %s: llama3 RoPE scaling on %s", s.Name, s.arch())
	}
	if s.hybrid() {
		return s.Hybrid.validate(s)
	}
	return nil
}

func (h Hybrid) validate(s Shape) error {
	sections := h.Sections[0] + h.Sections[1] + h.Sections[2] + h.Sections[3]
	switch {
	case h.RopeDims < 2 || h.RopeDims > s.HeadDim || h.RopeDims%2 != 0:
		return fmt.Errorf("synth: shape %s: %d rotated dims for head dim %d", s.Name, h.RopeDims, s.HeadDim)
	case sections != h.RopeDims/2:
		return fmt.Errorf("synth: shape %s: rope sections %v do not sum to %d", s.Name, h.Sections, h.RopeDims/2)
	case h.AttnInterval < 1 || h.AttnInterval > s.Layers:
		return fmt.Errorf("synth: shape %s: attention interval %d for %d layers", s.Name, h.AttnInterval, s.Layers)
	case h.ConvKernel < 1 || h.StateSize < 1 || h.KHeads < 1 || h.VHeads < 1:
		return fmt.Errorf("synth: shape %s: DeltaNet sizes must be positive", s.Name)
	case h.VHeads%h.KHeads != 0:
		return fmt.Errorf("synth: shape %s: %d V heads is not a multiple of %d K heads", s.Name, h.VHeads, h.KHeads)
	}
	return nil
}

// params is the number of weights, for ordering and reporting.
func (s Shape) params() int64 {
	var n int64
	for _, t := range plan(s, gguf.F32, 1) {
		n += t.elements()
	}
	return n
}
