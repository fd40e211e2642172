// Package sample picks the next token from logits the way llama.cpp's
// default sampler chain does: repetition penalty, top-k, top-p, min-p, then
// temperature and a seeded random draw (greedy at temperature 0).
package sample

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/bonsai-chat/bonsai/infer/quant"
)

// Params choose the sampling. Zero values switch a stage off, except
// Temperature, where 0 means greedy.
type Params struct {
	Temperature   float32 // 0: greedy (argmax)
	TopK          int     // keep the K most likely; 0: all
	TopP          float32 // keep the smallest set with this much probability; 0 or ≥1: all
	MinP          float32 // drop tokens below MinP × the top probability; 0: off
	RepeatPenalty float32 // llama.cpp's repeat penalty; 0 or 1: off
	RepeatLastN   int     // how many recent tokens the penalty looks at
	Seed          uint64
}

// Bonsai are PrismML's recommended settings for Bonsai 1.x (their demo's
// run_llama.sh).
func Bonsai(seed uint64) Params {
	return Params{Temperature: 0.5, TopK: 20, TopP: 0.85, RepeatPenalty: 1, RepeatLastN: 64, Seed: seed}
}

// Argmax reports whether every draw is the argmax of the raw logits:
// greedy, with no repetition penalty.
func (p Params) Argmax() bool {
	return p.Temperature == 0 && (p.RepeatPenalty == 0 || p.RepeatPenalty == 1 || p.RepeatLastN == 0)
}

// Validate rejects settings no stage can honour.
func (p Params) Validate() error {
	switch {
	case p.Temperature < 0 || isBad(p.Temperature):
		return fmt.Errorf("sample: temperature %v must be ≥ 0", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("sample: top-k %d must be ≥ 0", p.TopK)
	case p.TopP < 0 || p.TopP > 1 || isBad(p.TopP):
		return fmt.Errorf("sample: top-p %v must be in [0, 1]", p.TopP)
	case p.MinP < 0 || p.MinP > 1 || isBad(p.MinP):
		return fmt.Errorf("sample: min-p %v must be in [0, 1]", p.MinP)
	case p.RepeatPenalty < 0 || isBad(p.RepeatPenalty):
		return fmt.Errorf("sample: repeat penalty %v must be ≥ 0", p.RepeatPenalty)
	case p.RepeatLastN < 0:
		return fmt.Errorf("sample: repeat window %d must be ≥ 0", p.RepeatLastN)
	}
	return nil
}

func isBad(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }

type candidate struct {
	id    int32
	logit float32
	p     float32
}

// Sampler draws tokens. It keeps the recent tokens for the repetition
// penalty and its scratch space between calls, so sampling allocates
// nothing after the first token.
type Sampler struct {
	p       Params
	rng     *rand.Rand
	recent  []int32 // ring of the last RepeatLastN accepted tokens
	next    int
	cands   []candidate
	counted map[int32]struct{}
	// recentIDs are the distinct recent tokens (topCandidates' scratch).
	recentIDs []int32
}

// New returns a sampler; it fails on invalid parameters.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{
		p:       p,
		rng:     rand.New(rand.NewPCG(p.Seed, 0x5eed5a3b1e)),
		recent:  make([]int32, 0, p.RepeatLastN),
		counted: map[int32]struct{}{},
	}, nil
}

// Params are the sampler's settings.
func (s *Sampler) Params() Params { return s.p }

// Accept records a token of the context (prompt or generated) for the
// repetition penalty.
func (s *Sampler) Accept(id int32) {
	if s.p.RepeatLastN == 0 {
		return
	}
	if len(s.recent) < s.p.RepeatLastN {
		s.recent = append(s.recent, id)
		return
	}
	s.recent[s.next] = id
	s.next = (s.next + 1) % s.p.RepeatLastN
}

// Reset forgets the accepted tokens (a new conversation).
func (s *Sampler) Reset() { s.recent, s.next = s.recent[:0], 0 }

// Sample picks the next token. logits is not modified.
func (s *Sampler) Sample(logits []float32) int32 {
	if len(logits) == 0 {
		return -1
	}
	penalize := s.p.RepeatPenalty != 0 && s.p.RepeatPenalty != 1 && len(s.recent) > 0
	if s.p.Temperature == 0 && !penalize {
		return Greedy(logits)
	}
	k := s.p.TopK
	if s.p.Temperature == 0 {
		k = 1 // greedy over the penalized logits
	}
	var c []candidate
	if k > 0 && k < len(logits) {
		c = s.topCandidates(logits, k, penalize)
	} else {
		c = s.candidates(logits)
		if penalize {
			s.penalize(c)
		}
		c = topK(c, 0) // sorts
	}
	if s.p.Temperature == 0 {
		return c[0].id
	}
	return s.pick(c)
}

// pick is Sample's pipeline after top-k: top-p, min-p and the draw.
func (s *Sampler) pick(c []candidate) int32 {
	c = topP(c, s.p.TopP)
	c = minP(c, s.p.MinP)
	return s.draw(c, s.p.Temperature)
}

// MaxTopCandidates bounds the k TopCandidates takes: the most candidates a
// device hands over per token.
const MaxTopCandidates = 64

// TopCandidates reports whether Sample's draw from a vocabulary of vocab
// logits depends only on their TopK best (logit descending, lower id
// first on ties), so that SampleTop can take their place: temperature
// above 0, 0 < TopK ≤ min(maxK, MaxTopCandidates) and TopK < vocab,
// and no repetition penalty in effect.
func (p Params) TopCandidates(vocab, maxK int) bool {
	penalty := p.RepeatPenalty != 0 && p.RepeatPenalty != 1 && p.RepeatLastN > 0
	return p.Temperature > 0 && p.TopK > 0 && p.TopK <= min(maxK, MaxTopCandidates) && p.TopK < vocab && !penalty
}

// SampleTop is Sample from logits whose TopK best are top, in Sample's
// order (logit descending, lower id first on ties), where
// Params.TopCandidates holds: the same draw from the same random stream.
// It returns -1 when top holds fewer than TopK candidates.
func (s *Sampler) SampleTop(top []Logit) int32 {
	k := s.p.TopK
	if k <= 0 || len(top) < k {
		return -1
	}
	if cap(s.cands) < k {
		s.cands = make([]candidate, k)
	}
	c := s.cands[:k]
	for i, t := range top[:k] {
		c[i] = candidate{id: t.ID, logit: t.Logit}
	}
	return s.pick(c)
}

// topCandidates is the k best tokens after the repetition penalty, sorted,
// found without touching every logit twice: the penalty only changes the
// recent tokens, so the answer lies among the k+P best raw logits (P the
// number of distinct recent tokens) and the recent tokens themselves.
func (s *Sampler) topCandidates(logits []float32, k int, penalize bool) []candidate {
	s.recentIDs = s.recentIDs[:0]
	if penalize {
		clear(s.counted)
		for _, id := range s.recent {
			if _, seen := s.counted[id]; !seen && id >= 0 && int(id) < len(logits) {
				s.counted[id] = struct{}{}
				s.recentIDs = append(s.recentIDs, id)
			}
		}
	}
	want := min(len(logits), k+len(s.recentIDs))
	if cap(s.cands) < want+len(s.recentIDs) {
		s.cands = make([]candidate, 0, max(len(logits), want+len(s.recentIDs)))
	}
	c := s.cands[:0]
	for i := 0; i < len(logits); i++ {
		if len(c) == want {
			// Skip what cannot enter: ties keep the lower id, already in.
			if i = quant.FirstNotAtMost(logits, i, c[want-1].logit); i == len(logits) {
				break
			}
		}
		l := logits[i]
		if len(c) < want {
			c = append(c, candidate{})
		}
		j := len(c) - 1
		for j > 0 && l > c[j-1].logit {
			c[j] = c[j-1]
			j--
		}
		c[j] = candidate{id: int32(i), logit: l}
	}
	if penalize {
		for _, id := range s.recentIDs {
			found := false
			for i := range c {
				found = found || c[i].id == id
			}
			if !found {
				c = append(c, candidate{id: id, logit: logits[id]})
			}
		}
		for i := range c {
			if _, recent := s.counted[c[i].id]; recent {
				if c[i].logit > 0 {
					c[i].logit /= s.p.RepeatPenalty
				} else {
					c[i].logit *= s.p.RepeatPenalty
				}
			}
		}
		slices.SortFunc(c, byLogit)
	}
	return c[:min(k, len(c))]
}

func (s *Sampler) candidates(logits []float32) []candidate {
	if cap(s.cands) < len(logits) {
		s.cands = make([]candidate, len(logits))
	}
	c := s.cands[:len(logits)]
	for i, l := range logits {
		c[i] = candidate{id: int32(i), logit: l}
	}
	return c
}

// penalize is llama.cpp's repeat penalty: each distinct recent token's
// logit is divided by the penalty when positive, multiplied when not.
func (s *Sampler) penalize(c []candidate) {
	clear(s.counted)
	for _, id := range s.recent {
		if _, seen := s.counted[id]; seen || id < 0 || int(id) >= len(c) {
			continue
		}
		s.counted[id] = struct{}{}
		if l := &c[id].logit; *l > 0 {
			*l /= s.p.RepeatPenalty
		} else {
			*l *= s.p.RepeatPenalty
		}
	}
}

// byLogit orders candidates most likely first, lower id first on ties.
func byLogit(a, b candidate) int {
	if a.logit != b.logit {
		return cmp.Compare(b.logit, a.logit)
	}
	return cmp.Compare(a.id, b.id)
}

// topK keeps the k largest logits, sorted. k = 0 keeps all, still sorted,
// for the stages that follow.
func topK(c []candidate, k int) []candidate {
	if k <= 0 || k >= len(c) {
		slices.SortFunc(c, byLogit)
		return c
	}
	// Partial selection: keep the best k at the front, then sort them.
	slices.SortFunc(c[:k], byLogit)
	for i := k; i < len(c); i++ {
		if byLogit(c[i], c[k-1]) < 0 {
			// Insert c[i] into the sorted front, dropping the last.
			j := k - 1
			for j > 0 && byLogit(c[i], c[j-1]) < 0 {
				j--
			}
			x := c[i]
			copy(c[j+1:k], c[j:k-1])
			c[j] = x
		}
	}
	return c[:k]
}

// softmax sets p on sorted candidates (max first) and returns nothing.
func softmax(c []candidate, temp float32) {
	top := c[0].logit
	var sum float64
	for i := range c {
		e := float32(math.Exp(float64((c[i].logit - top) / temp)))
		c[i].p = e
		sum += float64(e)
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
}

// topP keeps the shortest prefix of sorted candidates whose probability
// reaches p (at least one), as llama.cpp's top-p.
func topP(c []candidate, p float32) []candidate {
	if p <= 0 || p >= 1 {
		return c
	}
	softmax(c, 1)
	var cum float64
	for i := range c {
		cum += float64(c[i].p)
		if cum >= float64(p) {
			return c[:i+1]
		}
	}
	return c
}

// minP drops candidates whose probability is below p times the top one's,
// that is logit < top + ln p.
func minP(c []candidate, p float32) []candidate {
	if p <= 0 {
		return c
	}
	floor := c[0].logit + float32(math.Log(float64(p)))
	for i := 1; i < len(c); i++ {
		if c[i].logit < floor {
			return c[:i]
		}
	}
	return c
}

// draw applies the temperature and samples from the softmax.
func (s *Sampler) draw(c []candidate, temp float32) int32 {
	softmax(c, temp)
	u := s.rng.Float64()
	var cum float64
	for _, x := range c {
		cum += float64(x.p)
		if u < cum {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// Greedy is the index of the largest logit, the first one on ties.
func Greedy(logits []float32) int32 {
	best := 0
	for i := 1; i < len(logits); i++ {
		if i = quant.FirstAbove(logits, i, logits[best]); i == len(logits) {
			break
		}
		best = i
	}
	return int32(best)
}

// Top writes the k largest logits, most likely first, into dst (reused when
// it has room) and returns it; for `bonsai run --top-logits`.
func Top(logits []float32, k int, dst []Logit) []Logit {
	dst = dst[:0]
	for i, l := range logits {
		if len(dst) == k && l <= dst[k-1].Logit {
			continue
		}
		if len(dst) < k {
			dst = append(dst, Logit{})
		}
		j := len(dst) - 1
		for j > 0 && l > dst[j-1].Logit {
			dst[j] = dst[j-1]
			j--
		}
		dst[j] = Logit{ID: int32(i), Logit: l}
	}
	return dst
}

// Logit is a token and its logit.
type Logit struct {
	ID    int32
	Logit float32
}
