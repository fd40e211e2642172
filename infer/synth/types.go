package synth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
)

// ErrUnsupportedType is returned for a weight type the generator cannot write.
var ErrUnsupportedType = errors.New("unsupported weight type")

// WeightTypes are the types every 2-D weight of a synthetic model can be
// stored in. Q2_0G128 is the legacy Prism layout, which current llama.cpp
// refuses, and PQ2_0 and PTQ1_0 exist only in PrismML's fork, so those
// three have no oracle.
var WeightTypes = []gguf.Type{
	gguf.Q1_0, gguf.Q2_0, gguf.Q2_0G128, gguf.PQ2_0, gguf.PTQ1_0, gguf.Q4_0, gguf.Q5_0, gguf.Q8_0,
	gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.F16, gguf.BF16, gguf.F32,
}

// ParseType reads a weight type name as ggml spells it ("q1_0", "q4_k",
// "q2_0_g128", "bf16"), case-insensitively.
func ParseType(name string) (gguf.Type, error) {
	for _, t := range WeightTypes {
		if strings.EqualFold(t.String(), name) {
			return t, nil
		}
	}
	names := make([]string, len(WeightTypes))
	for i, t := range WeightTypes {
		names[i] = strings.ToLower(t.String())
	}
	return 0, fmt.Errorf("%w %q (want one of %s)", ErrUnsupportedType, name, strings.Join(names, ", "))
}

func supported(t gguf.Type) bool {
	for _, w := range WeightTypes {
		if w == t {
			return true
		}
	}
	return false
}
