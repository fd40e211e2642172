package spec

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

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

// specDecode decodes n tokens with the Decoder and finishes it.
func specDecode(t *testing.T, m *infer.Model, prompt []int32, p sample.Params, n int, drafter Drafter, maxDraft int) ([]int32, *infer.Sequence, Stats) {
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
	d := NewDecoder(seq, smp, drafter, maxDraft)
	d.step = 1 // draft from the first step on: the test is about exactness, not speed
	var out []int32
	for len(out) < n {
		id, err := d.Next(n - len(out))
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Logits()) != m.Hparams.Vocab {
			t.Fatal("Logits is not a row of logits")
		}
		out = append(out, id)
		d.ctl.pause = 0 // keep drafting whatever the timings say
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	return out, seq, d.Stats()
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

// At temperature 0 the speculative decoder's tokens are plain decoding's,
// token for token, for both drafters and several draft lengths, on both
// architectures (qwen35's recurrent state is rewound from a snapshot), and
// it leaves the cache as plain decoding does: the same tokens, and the
// same logits for whatever comes next.
func TestGreedyIdentity(t *testing.T) {
	const n = 40
	for _, c := range []struct {
		arch string
		typ  gguf.Type
	}{{"qwen3", gguf.Q1_0}, {"qwen35", gguf.Q2_0}} {
		t.Run(c.arch, func(t *testing.T) {
			target := synthModel(t, c.arch, c.typ, 1, 0)
			draft := synthModel(t, c.arch, c.typ, 1, 3) // same seed, fewer layers: a related model
			// The passage, what the target says after it, and the passage
			// again: a lookup proposes the first reply again.
			first, _ := plainDecode(t, target, passage(), sample.Params{}, 16)
			prompt := slices.Concat(passage(), first, passage())
			for _, p := range []sample.Params{{}, {RepeatPenalty: 1.3, RepeatLastN: 16}} {
				want, wantCache := plainDecode(t, target, prompt, p, n)
				next := int32(4321)
				if err := target.Forward(slices.Concat(wantCache, []int32{next}), 0); err != nil {
					t.Fatal(err)
				}
				wantNext := slices.Clone(target.Logits())
				for _, maxDraft := range []int{1, 3, 8} {
					for _, mode := range []Mode{NGram, Draft, "oracle"} {
						var drafter Drafter = LookupDrafter(NewNgram())
						switch mode {
						case "oracle":
							drafter = &oracle{prompt: len(prompt), want: want}
						case Draft:
							md, err := NewModelDrafter(draft, p, 9)
							if err != nil {
								t.Fatal(err)
							}
							drafter = md
						}
						got, seq, st := specDecode(t, target, prompt, p, n, drafter, maxDraft)
						if !slices.Equal(got, want) {
							t.Fatalf("%s max %d penalty %v: tokens differ from plain decoding\n got %v\nwant %v", mode, maxDraft, p.RepeatPenalty, got, want)
						}
						// A random model seldom repeats itself, so the lookup
						// may find nothing; the oracle covers acceptance.
						if st.Drafted == 0 && mode != NGram {
							t.Errorf("%s max %d: nothing drafted", mode, maxDraft)
						}
						if !slices.Equal(seq.Tokens(), wantCache) {
							t.Fatalf("%s max %d: the cache holds %d tokens, plain decoding %d", mode, maxDraft, seq.Len(), len(wantCache))
						}
						if err := seq.Append(next); err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(target.Logits(), wantNext) {
							t.Fatalf("%s max %d: the logits after the reply differ from plain decoding's", mode, maxDraft)
						}
						t.Logf("%s max %d penalty %v: %d drafted, %d accepted in %d passes", mode, maxDraft, p.RepeatPenalty, st.Drafted, st.Accepted, st.Passes)
					}
				}
			}
		})
	}
}

// Prompt lookup proposes each token for sure, so its acceptance draws as
// plain sampling does: a seeded run gives plain decoding's tokens.
func TestLookupSampledIdentity(t *testing.T) {
	target := synthModel(t, "qwen3", gguf.Q1_0, 1, 0)
	prompt := passage()
	p := sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 5}
	want, _ := plainDecode(t, target, prompt, p, 40)
	got, _, st := specDecode(t, target, prompt, p, 40, LookupDrafter(NewNgram()), 6)
	if !slices.Equal(got, want) {
		t.Fatalf("tokens differ from plain sampling with the same seed\n got %v\nwant %v", got, want)
	}
	t.Logf("%d drafted, %d accepted", st.Drafted, st.Accepted)
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
	for i := len(ctx) - o.prompt; i < len(o.want) && len(o.buf) < k; i++ {
		id := o.want[i]
		if i%5 == 4 {
			id = (id + 1) % 1000
		}
		o.buf = append(o.buf, id)
	}
	return o.buf, nil, nil
}
