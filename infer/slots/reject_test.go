package slots_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/chisq"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// fixedDrafter drafts one token after prompt+[a], drawn from q[a], and
// says so: a draft model whose distribution is not the target's.
type fixedDrafter struct {
	prompt int
	q      map[int32][]sample.Prob
	rng    *rand.Rand
}

func (d *fixedDrafter) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	if len(ctx) != d.prompt+1 || k < 1 {
		return nil, nil, nil
	}
	q := d.q[ctx[d.prompt]]
	return []int32{sample.Pick(q, d.rng.Float64())}, [][]sample.Prob{q}, nil
}

// uniform is the uniform distribution on d's tokens.
func uniform(d []sample.Prob) []sample.Prob {
	out := make([]sample.Prob, len(d))
	for i, t := range d {
		out[i] = sample.Prob{ID: t.ID, P: 1 / float32(len(d))}
	}
	return out
}

// distAfter is the target's distribution of the token after ctx, as
// plain sampling with p defines it.
func distAfter(t *testing.T, m *infer.Model, ctx []int32, p sample.Params) []sample.Prob {
	t.Helper()
	if err := m.Forward(ctx, 0); err != nil {
		t.Fatal(err)
	}
	smp, err := sample.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return smp.Dist(m.Logits(), nil)
}

// A sampled request whose drafts come with their distributions decides
// them by rejection sampling: the first three tokens over many seeds are
// distributed as plain sampling's (χ² at the 1e-6 level against the exact
// law from the target's logits), and drafts are accepted at the rate
// rejection sampling gives, Σ min(p, q), not the point-mass rate Σ p·q.
func TestSchedulerRejectionSampling(t *testing.T) {
	if testing.Short() {
		t.Skip("samples a thousand replies")
	}
	m := loadModel(t, false, 128)
	prompt := seqIDs(12, 7)
	p := sample.Params{Temperature: 5, TopK: 3}

	type seq3 [3]int32
	want := map[seq3]float64{}
	drafts := map[int32][]sample.Prob{}
	var rejectRate, pointRate float64 // expected acceptance of the draft
	for _, a := range distAfter(t, m, prompt, p) {
		pb := distAfter(t, m, slices.Concat(prompt, []int32{a.ID}), p)
		q := uniform(pb)
		drafts[a.ID] = q
		for i, b := range pb {
			rejectRate += float64(a.P) * min(float64(b.P), float64(q[i].P))
			pointRate += float64(a.P) * float64(b.P) * float64(q[i].P)
			for _, c := range distAfter(t, m, slices.Concat(prompt, []int32{a.ID, b.ID}), p) {
				want[seq3{a.ID, b.ID, c.ID}] = float64(a.P) * float64(b.P) * float64(c.P)
			}
		}
	}
	m.Drop()
	const runs = 1200
	sigma := math.Sqrt(0.25 / runs)
	if rejectRate-pointRate < 10*sigma {
		t.Fatalf("the rates %.3f and %.3f are too close to tell the rules apart", rejectRate, pointRate)
	}

	dr := &fixedDrafter{prompt: len(prompt), q: drafts, rng: rand.New(rand.NewPCG(1, 2))}
	s, err := slots.New(slots.Options{Model: m, Slots: 1, Context: 128, Forward: true, Drafter: dr, MaxDraft: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counts := map[seq3]int{}
	drafted, accepted := 0, 0
	for run := range runs {
		p.Seed = uint64(run)
		st, err := s.Submit(context.Background(), slots.Request{Prompt: prompt, MaxTokens: 3, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		ids, res := drain(st)
		if len(ids) != 3 || res.Err != nil {
			t.Fatalf("run %d: %v, %+v", run, ids, res)
		}
		counts[seq3(ids)]++
		drafted += res.Drafted
		accepted += res.Accepted
	}
	cells := make([]seq3, 0, len(want))
	for k := range want {
		cells = append(cells, k)
	}
	obs := make([]int, len(cells))
	probs := make([]float64, len(cells))
	for i, c := range cells {
		obs[i], probs[i] = counts[c], want[c]
	}
	stat, df := chisq.Pearson(obs, probs, runs)
	rate := float64(accepted) / float64(drafted)
	t.Logf("χ² = %.1f over %d dof (bound %.1f); %d of %d drafts accepted: %.3f, rejection sampling's %.3f, point masses' %.3f",
		stat, df, chisq.Bound(df), accepted, drafted, rate, rejectRate, pointRate)
	if stat > chisq.Bound(df) {
		t.Errorf("χ² = %.1f over %d dof, above %.1f: the tokens are not distributed as plain sampling's", stat, df, chisq.Bound(df))
	}
	if drafted != runs || math.Abs(rate-rejectRate) > 5*sigma {
		t.Errorf("%d of %d drafts accepted (%.3f), rejection sampling accepts %.3f", accepted, drafted, rate, rejectRate)
	}
}
