package config

import (
	"math/rand/v2"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// Engine converts the sampler settings into the engine's form. A seed of -1
// draws a fresh random seed on every call, so call it once per reply.
func (s Sampling) Engine() engine.Sampling {
	seed := uint64(s.Seed)
	if s.Seed < 0 {
		seed = rand.Uint64()
	}
	return engine.Sampling{
		Temperature:   float32(s.Temperature),
		TopK:          s.TopK,
		TopP:          float32(s.TopP),
		MinP:          float32(s.MinP),
		RepeatPenalty: float32(s.RepeatPenalty),
		RepeatLastN:   s.RepeatLastN,
		Seed:          seed,
	}
}
