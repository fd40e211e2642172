package synth

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Shape is the architecture of a Qwen3 (Bonsai 1.x) model: everything the
// generator needs to lay out its tensors.
type Shape struct {
	Name      string
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
}

// ErrUnknownShape is returned for a shape name outside Shapes.
var ErrUnknownShape = errors.New("unknown model shape")

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

// ShapeNames lists the shape names, smallest model first.
func ShapeNames() []string {
	names := make([]string, 0, len(Shapes))
	for n := range Shapes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return Shapes[names[i]].params() < Shapes[names[j]].params() })
	return names
}

// ShapeByName looks a shape up by its name ("tiny", "1.7b", "4b", "8b").
func ShapeByName(name string) (Shape, error) {
	s, ok := Shapes[strings.ToLower(name)]
	if !ok {
		return Shape{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknownShape, name, strings.Join(ShapeNames(), ", "))
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
	case s.Vocab < minVocab || s.Vocab > qwenVocab:
		return fmt.Errorf("synth: shape %s: vocab %d outside [%d, %d]", s.Name, s.Vocab, minVocab, qwenVocab)
	case s.Context < 1:
		return fmt.Errorf("synth: shape %s: context %d", s.Name, s.Context)
	}
	return nil
}

// params is the number of weights, for ordering and reporting.
func (s Shape) params() int64 {
	h, q, kv, f := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.FFN)
	perLayer := h*q + 2*h*kv + q*h + 3*h*f
	n := int64(s.Layers)*perLayer + int64(s.Vocab)*h
	if !s.Tied {
		n += int64(s.Vocab) * h
	}
	return n
}
