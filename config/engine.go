package config

import (
	"math/rand/v2"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// SeedFor is the one seed rule that the chat, `bonsai run` and `bonsai
// bench` share: a seed the user set (0 and up, from the file, the
// environment or --seed) is used as is, so the same prompt gives the same
// reply; -1, the default, draws a fresh random seed on every call. explicit
// says which, for the callers that record a random seed so that a result
// can be reproduced.
func (s Sampling) SeedFor() (seed uint64, explicit bool) {
	if s.Seed < 0 {
		// Below 2⁶³, so that a recorded seed can be given back (--seed,
		// BONSAI_SEED and the file take an int64).
		return uint64(rand.Int64()), false
	}
	return uint64(s.Seed), true
}

// Engine converts the sampler settings into the engine's form, with a seed
// from SeedFor: call it once per reply.
func (s Sampling) Engine() engine.Sampling {
	seed, _ := s.SeedFor()
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
