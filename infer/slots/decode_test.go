package slots_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/chisq"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// The chat's speculative decoding is the scheduler's one slot run through
// Forward (as infer/engine runs it): these tests hold it to plain
// decoding, computed apart from the scheduler on a second copy of the
// model.

// synthModel loads synth's tiny shape of arch on the CPU; layers, if not
// 0, overrides its depth (a smaller draft of the same vocabulary).
func synthModel(t testing.TB, arch string, typ gguf.Type, seed uint64, layers int) *infer.Model {
	t.Helper()
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if layers > 0 {
		s.Layers = layers
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d-%d.gguf", arch, seed, layers))
	if err := synth.Write(path, synth.Options{Shape: s, Type: typ, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: 512, Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// plainDecode is the reference: prefill, then sample and run one token at
// a time. It returns the tokens and the cache's tokens at the end (every
// token before the last).
func plainDecode(t *testing.T, m *infer.Model, prompt []int32, p sample.Params, n int) ([]int32, []int32) {
	t.Helper()
	seq := infer.NewSequence(m)
	if _, err := seq.Prefill(prompt, nil); err != nil {
		t.Fatal(err)
	}
	smp, err := sample.New(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range prompt {
		smp.Accept(id)
	}
	var out []int32
	for {
		id := smp.Sample(m.Logits())
		smp.Accept(id)
		out = append(out, id)
		if len(out) == n {
			return out, slices.Clone(seq.Tokens())
		}
		if err := seq.Append(id); err != nil {
			t.Fatal(err)
		}
	}
}

// passage is a prompt whose continuation a lookup can find: a run of
// tokens said twice, then its start again.
func passage() []int32 {
	var run []int32
	for i := range 24 {
		run = append(run, int32(100+i*37%900))
	}
	return slices.Concat(run, []int32{7, 8}, run, []int32{7, 8}, run[:6])
}

// oracle drafts plain decoding's own continuation with every fifth token
// wrong: runs of accepted tokens and rejections at every offset.
type oracle struct {
	prompt int
	want   []int32
	buf    []int32
}

func (o *oracle) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	o.buf = o.buf[:0]
	for i := len(ctx) - o.prompt; i >= 0 && i < len(o.want) && len(o.buf) < k; i++ {
		id := o.want[i]
		if i%5 == 4 {
			id = (id + 1) % 1000
		}
		o.buf = append(o.buf, id)
	}
	return o.buf, nil, nil
}

// At temperature 0, and sampled with a seed when the drafts are point
// masses (prompt lookup, an oracle), the one slot's speculative tokens are
// plain decoding's, token for token, for every drafter and several draft
// lengths, on both architectures (qwen35's recurrent state is taken back
// after a rejected draft); and the cache is left as plain decoding leaves
// it: the same tokens, and the same logits for whatever comes next.
func TestForwardSpeculationIsPlainDecoding(t *testing.T) {
	const n = 40
	for _, c := range []struct {
		arch string
		typ  gguf.Type
	}{{"qwen3", gguf.Q1_0}, {"qwen35", gguf.Q2_0}} {
		t.Run(c.arch, func(t *testing.T) {
			target := synthModel(t, c.arch, c.typ, 1, 0)
			ref := synthModel(t, c.arch, c.typ, 1, 0)
			draft := synthModel(t, c.arch, c.typ, 1, 3) // same seed, fewer layers: a related model
			// The passage, what the target says after it, and the passage
			// again: a lookup proposes the first reply again.
			first, _ := plainDecode(t, ref, passage(), sample.Params{}, 16)
			prompt := slices.Concat(passage(), first, passage())
			for _, p := range []sample.Params{{}, {RepeatPenalty: 1.3, RepeatLastN: 16},
				{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 5}} {
				want, wantCache := plainDecode(t, ref, prompt, p, n)
				next := int32(4321)
				if err := ref.Forward(slices.Concat(wantCache, []int32{next}), 0); err != nil {
					t.Fatal(err)
				}
				wantNext := slices.Clone(ref.Logits())
				for _, maxDraft := range []int{1, 3, 8} {
					s, err := slots.New(slots.Options{Model: target, Slots: 1, Context: target.Context(), Forward: true, MaxDraft: maxDraft})
					if err != nil {
						t.Fatal(err)
					}
					for _, mode := range []spec.Mode{spec.NGram, spec.Draft, "oracle"} {
						var drafter spec.Drafter = spec.LookupDrafter(spec.NewNgram())
						switch mode {
						case "oracle":
							drafter = &oracle{prompt: len(prompt), want: want}
						case spec.Draft:
							if !p.Argmax() {
								continue // a draft model's tokens are decided by rejection: the distribution test
							}
							md, err := spec.NewModelDrafter(draft, p, 9)
							if err != nil {
								t.Fatal(err)
							}
							drafter = md
						}
						what := fmt.Sprintf("%s, max %d, %+v", mode, maxDraft, p)
						st, err := s.Submit(context.Background(), slots.Request{Prompt: prompt, Params: p, MaxTokens: n, Drafter: drafter})
						if err != nil {
							t.Fatal(err)
						}
						got, res := drain(st)
						if res.Err != nil {
							t.Fatalf("%s: %v", what, res.Err)
						}
						if !slices.Equal(got, want) {
							t.Fatalf("%s: tokens differ from plain decoding\n got %v\nwant %v", what, got, want)
						}
						// A random model seldom repeats itself, so the lookup
						// may find nothing; the oracle covers acceptance.
						if res.Drafted == 0 && mode != spec.NGram {
							t.Errorf("%s: nothing drafted", what)
						}
						err = s.State(func(seq *infer.Sequence) error {
							if !slices.Equal(seq.Tokens(), wantCache) {
								return fmt.Errorf("the cache holds %d tokens, plain decoding %d", seq.Len(), len(wantCache))
							}
							if err := seq.Append(next); err != nil {
								return err
							}
							if !slices.Equal(target.Logits(), wantNext) {
								return fmt.Errorf("the logits after the reply differ from plain decoding's")
							}
							seq.Reset()
							return nil
						})
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						t.Logf("%s: %d drafted, %d accepted in %d passes", what, res.Drafted, res.Accepted, res.Verifies)
					}
					s.Close()
				}
			}
		})
	}
}

// With sampling and a draft model, the tokens that come out are
// distributed as plain sampling's: the joint law of the first three reply
// tokens over many seeds, against the exact law computed from the
// target's logits (χ² at the 1e-6 level, chisq.Bound). The second token
// is drafted by a model whose distribution differs from the target's and
// decided by the rejection rule.
func TestForwardDraftSamplingKeepsDistribution(t *testing.T) {
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
	for _, a := range distAfter(t, target, prompt, p) {
		for _, b := range distAfter(t, target, slices.Concat(prompt, []int32{a.ID}), p) {
			for _, c := range distAfter(t, target, slices.Concat(prompt, []int32{a.ID, b.ID}), p) {
				want[seq3{a.ID, b.ID, c.ID}] = float64(a.P) * float64(b.P) * float64(c.P)
			}
		}
	}
	target.Drop()
	cells := make([]seq3, 0, len(want))
	for k := range want {
		cells = append(cells, k)
	}

	const runs = 1500
	md, err := spec.NewModelDrafter(draft, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := slots.New(slots.Options{Model: target, Slots: 1, Context: target.Context(), Forward: true, MaxDraft: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counts := map[seq3]int{}
	drafted, accepted := 0, 0
	for run := range runs {
		p.Seed = uint64(run)
		if err := md.SetSampling(sample.Params{Temperature: 0.5, TopK: 3}, uint64(run)+1<<32); err != nil {
			t.Fatal(err)
		}
		st, err := s.Submit(context.Background(), slots.Request{Prompt: prompt, Params: p, MaxTokens: 3, Drafter: md})
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
	obs := make([]int, len(cells))
	probs := make([]float64, len(cells))
	for i, c := range cells {
		obs[i], probs[i] = counts[c], want[c]
	}
	stat, df := chisq.Pearson(obs, probs, runs)
	bound := chisq.Bound(df)
	t.Logf("χ² = %.1f over %d dof (bound %.1f); drafted %d, accepted %d", stat, df, bound, drafted, accepted)
	if accepted == 0 || accepted == drafted {
		t.Errorf("accepted %d of %d drafts: the test needs both outcomes", accepted, drafted)
	}
	if stat > bound {
		t.Errorf("χ² = %.1f over %d dof, above %.1f: speculative sampling does not keep the target's distribution", stat, df, bound)
	}
}
