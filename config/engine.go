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

// SamplingFor is the sampling of a reply from a model whose recommendation
// is model (engine.DefaultSampling): every sampling key the user set (file,
// environment or flag) overrides it, the others keep the model's values, so
// that Bonsai's numbers are not forced on another model. The seed is the
// user's, or random per reply.
func (c *Config) SamplingFor(model engine.Sampling) engine.Sampling {
	mine := c.Sampling.Engine()
	set := func(key string) bool { return c.Sources[key].Origin != FromDefault }
	s := model
	if set("sampling.temperature") {
		s.Temperature = mine.Temperature
	}
	if set("sampling.top_k") {
		s.TopK = mine.TopK
	}
	if set("sampling.top_p") {
		s.TopP = mine.TopP
	}
	if set("sampling.min_p") {
		s.MinP = mine.MinP
	}
	if set("sampling.repeat_penalty") {
		s.RepeatPenalty = mine.RepeatPenalty
	}
	if set("sampling.repeat_last_n") {
		s.RepeatLastN = mine.RepeatLastN
	}
	s.Seed = mine.Seed
	return s
}
