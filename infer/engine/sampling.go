package engine

import (
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// DefaultSampling is the sampling a model is run with when nobody chose:
// PrismML's recommendation for a Bonsai model (the variant records it),
// llama.cpp's defaults for any other. It is the one place these defaults
// live; `bonsai run`'s flags and a request's Sampling override them.
func DefaultSampling(v infer.Variant) Sampling {
	if v.Bonsai {
		return Sampling{Temperature: v.Temperature, TopK: v.TopK, TopP: v.TopP, RepeatPenalty: 1, RepeatLastN: 64}
	}
	return Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
}

// sampling picks the request's parameters, else the engine's, else the
// model's recommendation with a seed from the clock.
func (e *Engine) sampling(req *Sampling) sample.Params {
	s := req
	if s == nil {
		s = e.opts.Sampling
	}
	if s == nil {
		d := DefaultSampling(e.cur.model.Variant)
		d.Seed = uint64(time.Now().UnixNano())
		s = &d
	}
	return s.Params()
}

// Params are the sampler's parameters for s.
func (s Sampling) Params() sample.Params {
	p := sample.Params{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP,
		RepeatPenalty: s.RepeatPenalty, RepeatLastN: s.RepeatLastN, Seed: s.Seed}
	if p.RepeatLastN == 0 && p.RepeatPenalty != 0 && p.RepeatPenalty != 1 {
		p.RepeatLastN = 64
	}
	return p
}
