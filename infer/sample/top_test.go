package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refTop is the k best logits by a full sort: logit descending, lower id
// first on ties, −0 equal to +0 (float comparison).
func refTop(logits []float32, k int) []Logit {
	all := make([]Logit, len(logits))
	for i, l := range logits {
		all[i] = Logit{ID: int32(i), Logit: l}
	}
	slices.SortStableFunc(all, func(a, b Logit) int { return cmp.Compare(b.Logit, a.Logit) })
	return all[:k]
}

// TestSampleTopIsSample draws with Sample from whole logits and with
// SampleTop from their top-k, two samplers of one seed side by side: the
// tokens must be the same draw for draw, over logits with ties and signed
// zeros.
func TestSampleTopIsSample(t *testing.T) {
	cases := []Params{
		Bonsai(1),
		{Temperature: 0.5, TopK: 20, TopP: 0.85, Seed: 2},
		{Temperature: 1, TopK: 1, Seed: 3},
		{Temperature: 1.3, TopK: 64, Seed: 4},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 5},
		{Temperature: 2, TopK: 7, MinP: 0.3, RepeatPenalty: 1, RepeatLastN: 64, Seed: 6},
		{Temperature: 0.7, TopK: 30, RepeatPenalty: 1.2, RepeatLastN: 0, Seed: 7},
	}
	const vocab = 300
	for _, p := range cases {
		if !p.TopCandidates(vocab, MaxTopCandidates) {
			t.Fatalf("%+v: not reported as top-k sampling", p)
		}
		full, _ := New(p)
		top, _ := New(p)
		rng := rand.New(rand.NewPCG(p.Seed, 9))
		logits := make([]float32, vocab)
		for step := 0; step < 400; step++ {
			for i := range logits {
				// coarse values: many ties; zeros of both signs
				logits[i] = float32(rng.IntN(41)-20) / 4
				if logits[i] == 0 && rng.IntN(2) == 0 {
					logits[i] = float32(math.Copysign(0, -1))
				}
			}
			want := full.Sample(logits)
			got := top.SampleTop(refTop(logits, p.TopK))
			if got != want {
				t.Fatalf("%+v step %d: SampleTop %d, Sample %d", p, step, got, want)
			}
		}
	}
}

// TestTopCandidates: where the draw depends on more than the top-k.
func TestTopCandidates(t *testing.T) {
	base := Params{Temperature: 0.5, TopK: 20}
	for _, c := range []struct {
		name  string
		p     Params
		vocab int
		maxK  int
		want  bool
	}{
		{"bonsai", Bonsai(0), 1000, 64, true},
		{"greedy", Params{TopK: 20}, 1000, 64, false},
		{"top-k off", Params{Temperature: 0.5}, 1000, 64, false},
		{"k at vocab", base, 20, 64, false},
		{"k past the device's", base, 1000, 16, false},
		{"k past the cap", Params{Temperature: 0.5, TopK: MaxTopCandidates + 1}, 1000, 1000, false},
		{"penalty", Params{Temperature: 0.5, TopK: 20, RepeatPenalty: 1.1, RepeatLastN: 64}, 1000, 64, false},
		{"penalty without window", Params{Temperature: 0.5, TopK: 20, RepeatPenalty: 1.1}, 1000, 64, true},
	} {
		if got := c.p.TopCandidates(c.vocab, c.maxK); got != c.want {
			t.Errorf("%s: TopCandidates %v, want %v", c.name, got, c.want)
		}
	}
	s, _ := New(base)
	if s.SampleTop(make([]Logit, 5)) != -1 {
		t.Error("SampleTop with fewer than TopK candidates did not fail")
	}
}
