package spec

import (
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/chisq"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// exactDist is the target's distribution of the next token after ctx,
// as plain sampling with p defines it.
func exactDist(t *testing.T, m *infer.Model, ctx []int32, p sample.Params) []sample.Prob {
	t.Helper()
	if err := m.Forward(ctx, 0); err != nil {
		t.Fatal(err)
	}
	smp, err := sample.New(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ctx {
		smp.Accept(id)
	}
	return smp.Dist(m.Logits(), nil)
}

// With sampling and a draft model, the tokens that come out are
// distributed as plain sampling's: the joint law of the first three reply
// tokens over many seeds, against the exact law computed from the
// target's logits (χ² at the 1e-6 level, chisq.Bound). The second and
// third tokens go through the rejection rule: drafted by a model whose
// distribution differs from the target's.
func TestDraftSamplingKeepsDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("samples a few thousand replies")
	}
	target := synthModel(t, "qwen3", gguf.Q1_0, 1, 0)
	// The draft is a second copy of the target sampled colder: the same
	// support with other probabilities, so that drafts are accepted at
	// times and the residual decides the rest.
	draft := synthModel(t, "qwen3", gguf.Q1_0, 1, 0)
	prompt := passage()
	p := sample.Params{Temperature: 1.5, TopK: 3}

	// The exact law of (t1, t2, t3).
	type seq3 [3]int32
	want := map[seq3]float64{}
	for _, a := range exactDist(t, target, prompt, p) {
		for _, b := range exactDist(t, target, slices.Concat(prompt, []int32{a.ID}), p) {
			for _, c := range exactDist(t, target, slices.Concat(prompt, []int32{a.ID, b.ID}), p) {
				want[seq3{a.ID, b.ID, c.ID}] = float64(a.P) * float64(b.P) * float64(c.P)
			}
		}
	}
	cells := make([]seq3, 0, len(want))
	for k := range want {
		cells = append(cells, k)
	}

	const runs = 1500
	seq := infer.NewSequence(target)
	md, err := NewModelDrafter(draft, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[seq3]int{}
	var st Stats
	for run := range runs {
		if _, err := seq.Prefill(prompt, nil); err != nil {
			t.Fatal(err)
		}
		p.Seed = uint64(run)
		smp, err := sample.New(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range prompt {
			smp.Accept(id)
		}
		if err := md.SetSampling(sample.Params{Temperature: 0.5, TopK: 3}, uint64(run)+1<<32); err != nil {
			t.Fatal(err)
		}
		d := NewDecoder(seq, smp, md, 2)
		d.step = 1
		var got seq3
		for i := range got {
			if got[i], err = d.Next(3 - i); err != nil {
				t.Fatal(err)
			}
			d.ctl.pause = 0
		}
		counts[got]++
		s := d.Stats()
		st.Drafted += s.Drafted
		st.Accepted += s.Accepted
	}
	obs := make([]int, len(cells))
	probs := make([]float64, len(cells))
	for i, c := range cells {
		obs[i], probs[i] = counts[c], want[c]
	}
	stat, df := chisq.Pearson(obs, probs, runs)
	bound := chisq.Bound(df)
	t.Logf("χ² = %.1f over %d dof (bound %.1f); drafted %d, accepted %d (%.0f%%)", stat, df, bound, st.Drafted, st.Accepted, 100*st.Rate())
	if st.Accepted == 0 || st.Accepted == st.Drafted {
		t.Errorf("accepted %d of %d drafts: the test needs both outcomes", st.Accepted, st.Drafted)
	}
	if stat > bound {
		t.Errorf("χ² = %.1f over %d dof, above %.1f: speculative sampling does not keep the target's distribution", stat, df, bound)
	}
}
