package sample

// Speculative decoding (infer/spec) accepts a drafted token by comparing
// probabilities, so it needs the distribution Sample draws from, not only a
// draw: Dist is Sample's pipeline stopped before the draw, and Float64 the
// random stream the draw would use.

// Prob is a token and its probability.
type Prob struct {
	ID int32
	P  float32
}

// Dist writes into dst (reused when it has room) the distribution Sample
// draws the next token from, most likely first: after the repetition
// penalty, top-k, top-p, min-p and the temperature, exactly as Sample
// computes them. At temperature 0 it is the point mass on the token Sample
// returns. logits is not modified.
func (s *Sampler) Dist(logits []float32, dst []Prob) []Prob {
	dst = dst[:0]
	if len(logits) == 0 {
		return dst
	}
	penalize := s.p.RepeatPenalty != 0 && s.p.RepeatPenalty != 1 && len(s.recent) > 0
	if s.p.Temperature == 0 {
		return append(dst, Prob{ID: s.Sample(logits), P: 1})
	}
	var c []candidate
	if k := s.p.TopK; k > 0 && k < len(logits) {
		c = s.topCandidates(logits, k, penalize)
	} else {
		c = s.candidates(logits)
		if penalize {
			s.penalize(c)
		}
		c = topK(c, 0)
	}
	c = topP(c, s.p.TopP)
	c = minP(c, s.p.MinP)
	softmax(c, s.p.Temperature)
	for _, x := range c {
		dst = append(dst, Prob{ID: x.id, P: x.p})
	}
	return dst
}

// Float64 draws a number in [0, 1) from the stream Sample draws from.
func (s *Sampler) Float64() float64 { return s.rng.Float64() }

// Pick is the token of d that u, in [0, 1), selects by its cumulative
// probability, as Sample's draw does; the last token when rounding leaves
// u beyond the sum.
func Pick(d []Prob, u float64) int32 {
	var cum float64
	for _, x := range d {
		cum += float64(x.P)
		if u < cum {
			return x.ID
		}
	}
	if len(d) == 0 {
		return -1
	}
	return d[len(d)-1].ID
}
