package spec

import (
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/internal/chisq"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// rule is an acceptance rule under test: acceptDraft, or a wrong one.
type rule func(p []sample.Prob, q map[int32]float32, x int32, u, v float64) int32

// drawThrough runs n drafts x ~ q through the rule and counts the tokens
// it emits.
func drawThrough(r rule, p, q []sample.Prob, vocab, n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1))
	qm := map[int32]float32{}
	for _, t := range q {
		qm[t.ID] = t.P
	}
	counts := make([]int, vocab)
	for range n {
		x := sample.Pick(q, rng.Float64())
		counts[r(p, qm, x, rng.Float64(), rng.Float64())]++
	}
	return counts
}

func randomDist(rng *rand.Rand, vocab int, support []int32) []sample.Prob {
	var d []sample.Prob
	var sum float64
	for _, id := range support {
		w := rng.Float64() + 0.05
		d = append(d, sample.Prob{ID: id, P: float32(w)})
		sum += w
	}
	for i := range d {
		d[i].P = float32(float64(d[i].P) / sum)
	}
	return d
}

// The rejection rule emits the target's distribution p whatever the
// draft's q, including tokens only one of them allows; and the test has
// the power to catch rules that are almost right.
func TestAcceptDraftKeepsTargetDistribution(t *testing.T) {
	const vocab, n = 12, 200000
	correct := func(p []sample.Prob, q map[int32]float32, x int32, u, v float64) int32 {
		y, _ := acceptDraft(p, q, x, u, v, nil)
		return y
	}
	// Wrong: on rejection, draw from p instead of the residual.
	fromP := func(p []sample.Prob, q map[int32]float32, x int32, u, v float64) int32 {
		if y, ok := acceptDraft(p, q, x, u, v, nil); ok {
			return y
		}
		return sample.Pick(p, v)
	}
	// Wrong: on rejection, draw from p without x (the point-mass
	// residual) after accepting with min(1, p(x)/q(x)).
	withoutX := func(p []sample.Prob, q map[int32]float32, x int32, u, v float64) int32 {
		if y, ok := acceptDraft(p, q, x, u, v, nil); ok {
			return y
		}
		y, _ := acceptDraft(p, map[int32]float32{x: 1}, x, 1, v, nil)
		return y
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for c := range 4 {
		// p on tokens 0..8, q on 3..11: each has tokens the other lacks.
		p := randomDist(rng, vocab, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8})
		q := randomDist(rng, vocab, []int32{3, 4, 5, 6, 7, 8, 9, 10, 11})
		if c == 3 {
			q = p // the draft is the target: everything is accepted
		}
		want := make([]float64, vocab)
		for _, x := range p {
			want[x.ID] = float64(x.P)
		}
		stat, df := chisq.Pearson(drawThrough(correct, p, q, vocab, n, uint64(c)), want, n)
		if bound := chisq.Bound(df); stat > bound {
			t.Errorf("case %d: χ² = %.1f over %d dof, above %.1f: the emitted tokens are not distributed as p", c, stat, df, bound)
		}
		if c == 3 {
			continue // the wrong rules agree with the right one when q = p
		}
		for name, wrong := range map[string]rule{"residual p": fromP, "residual p without x": withoutX} {
			stat, df := chisq.Pearson(drawThrough(wrong, p, q, vocab, n, uint64(c)), want, n)
			if bound := chisq.Bound(df); stat <= bound {
				t.Errorf("case %d: the wrong rule %q passes (χ² = %.1f ≤ %.1f): the test lacks power", c, name, stat, bound)
			}
		}
	}
}

func TestNgramDraft(t *testing.T) {
	g := &Ngram{Min: 2, Max: 4}
	for _, c := range []struct {
		ctx  []int32
		k    int
		want []int32
	}{
		{[]int32{1, 2, 3, 4, 5, 9, 1, 2, 3}, 3, []int32{4, 5, 9}},
		{[]int32{1, 2, 3, 4, 5, 9, 1, 2, 3}, 10, []int32{4, 5, 9, 1, 2, 3}},
		// The longest match wins over a later shorter one.
		{[]int32{7, 8, 9, 1, 8, 9, 2, 7, 8, 9}, 1, []int32{1}},
		// The latest occurrence of the longest size.
		{[]int32{8, 9, 1, 8, 9, 2, 5, 8, 9}, 2, []int32{2, 5}},
		{[]int32{1, 2, 3, 4}, 3, nil},
		{[]int32{5, 5}, 3, nil}, // a one-token match is below Min
		{nil, 3, nil},
	} {
		if got := g.Draft(c.ctx, c.k); !equal(got, c.want) {
			t.Errorf("Draft(%v, %d) = %v, want %v", c.ctx, c.k, got, c.want)
		}
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
