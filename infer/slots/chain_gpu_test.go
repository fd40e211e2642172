//go:build cgo && !nogpu

package slots_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// chainModels are the architectures whose lone generation chains on the
// GPU: qwen3, and the hybrid qwen35, whose chained pass in flight, given
// back when the chain stops, is taken back from the recurrent state too.
var chainModels = []struct {
	name  string
	write func(t *testing.T) *gguf.File
}{
	{"qwen3", func(t *testing.T) *gguf.File {
		cfg := tinymodel.Small(gguf.Q1_0)
		cfg.Tied = false
		f, err := tinymodel.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}},
	{"qwen35", func(t *testing.T) *gguf.File {
		shape, err := synth.ArchShape("qwen35", "tiny")
		if err != nil {
			t.Fatal(err)
		}
		shape.Vocab = 1024
		path := filepath.Join(t.TempDir(), "qwen35.gguf")
		if err := synth.Write(path, synth.Options{Shape: shape, Type: gguf.Q1_0, Seed: 5}); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}},
}

// A lone generation on a model that chains runs its steps chained (the
// scheduler's fast path, the chat's every step) and gets what plain steps
// give, on both architectures:
//   - greedy, the tokens slots.Greedy gives plainly, and the cache the chain
//     leaves serves a follow-up as plain decoding's would, after a finished
//     and after a cancelled generation; a request that runs into the end
//     of its slot stops there, as plainly;
//   - sampled, for several settings, the tokens of the same request kept
//     off the chain (its Chain hook says no), with the chain always on,
//     turned off midway and toggled every few steps (a chat that profiles
//     some steps), each step either chained or announced to Step, and the
//     follow-up turn as plain decoding's; a sampler whose draw needs the
//     whole row (a repetition penalty, top-k off) and a request for
//     log-probabilities or raw logits never chain;
//   - with prompt lookup, drafts are verified between chained steps, and
//     the tokens are still plain decoding's.
func TestSchedulerChainsALoneGeneration(t *testing.T) {
	for _, mc := range chainModels {
		t.Run(mc.name, func(t *testing.T) {
			f := mc.write(t)
			t.Cleanup(func() { f.Close() })
			const ctx = 96
			m, err := infer.Load(f, infer.Options{Backend: "gpu", Batch: 32, Context: ctx, GPU: infer.GPUOptions{AllowSoftware: true}})
			if err != nil {
				if errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
					t.Skipf("no GPU adapter: %v", err)
				}
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			if infer.NewSequence(m).NewChain() == nil {
				t.Fatalf("no chain on a Q1_0 %s model on the GPU", mc.name)
			}
			checkChains(t, m, ctx)
		})
	}
}

func checkChains(t *testing.T, m *infer.Model, ctx int) {
	// The references first: they run on the cache the scheduler's slot
	// then takes over.
	prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}
	full, err := slots.Greedy(m, prompt, ctx-len(prompt)+1, false) // to the end of the slot
	if err != nil {
		t.Fatal(err)
	}
	want := full[:20]
	next := slices.Concat(prompt, want[:19], []int32{7, 8})
	wantNext, err := slots.Greedy(m, next, 6, false)
	if err != nil {
		t.Fatal(err)
	}
	quote := slices.Concat(prompt, full[:30], prompt, full[:4])
	wantQuote, err := slots.Greedy(m, quote, 30, false)
	if err != nil {
		t.Fatal(err)
	}
	m.Drop()
	s, err := slots.New(slots.Options{Model: m, Slots: 1, Context: ctx, Forward: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	gen := func(r slots.Request) ([]int32, slots.Result) {
		t.Helper()
		st, err := s.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		ids, res := drain(st)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return ids, res
	}
	// chained is what gen(r) chained.
	chained := func(r slots.Request) ([]int32, slots.Result, int) {
		t.Helper()
		before := s.Stats().Chained
		ids, res := gen(r)
		return ids, res, int(s.Stats().Chained - before)
	}

	got, _, n := chained(slots.Request{Prompt: prompt, MaxTokens: 20})
	if !slices.Equal(got, want) {
		t.Fatalf("chained greedy\n%v\nwant\n%v", got, want)
	}
	if n < 15 {
		t.Fatalf("%d of 19 steps ran chained", n)
	}
	// The slot holds the prompt and every token but the last.
	gotNext, res := gen(slots.Request{Prompt: next, MaxTokens: 6})
	if res.CachedTokens != len(prompt)+19 || !slices.Equal(gotNext, wantNext) {
		t.Fatalf("follow-up: %v with %d cached tokens, want %v with %d", gotNext, res.CachedTokens, wantNext, len(prompt)+19)
	}
	// Cancelled while chained: the slot keeps what plain decoding would
	// have run, and a follow-up reuses it.
	cctx, cancel := context.WithCancel(context.Background())
	st, err := s.Submit(cctx, slots.Request{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	var cut []int32
	for len(cut) < 8 {
		toks, done := st.Next()
		for _, tk := range toks {
			cut = append(cut, tk.ID)
		}
		if done {
			t.Fatal("the generation ended before the cancel")
		}
	}
	cancel()
	rest, res := drain(st)
	cut = append(cut, rest...)
	if res.Reason != "cancelled" || !slices.Equal(cut, full[:len(cut)]) {
		t.Fatalf("cancelled: %s after %v, want a prefix of %v", res.Reason, cut, full)
	}
	again := slices.Concat(prompt, cut, []int32{7, 8})
	cancelled, res := gen(slots.Request{Prompt: again, MaxTokens: 4})
	if res.CachedTokens != len(prompt)+len(cut)-1 {
		t.Fatalf("after a cancel the follow-up reused %d tokens, want %d", res.CachedTokens, len(prompt)+len(cut)-1)
	}
	got, res = gen(slots.Request{Prompt: prompt})
	if res.Reason != "length" || !slices.Equal(got, full) {
		t.Fatalf("to the end of the slot: %d tokens (%s), want %d\n%v\n%v", len(got), res.Reason, len(full), got, full)
	}

	for _, c := range []struct {
		name  string
		p     sample.Params
		chain bool
	}{
		{"greedy", sample.Params{}, true},
		{"bonsai", sample.Bonsai(7), true},
		{"hot", sample.Params{Temperature: 1.5, TopK: 64, Seed: 3}, true},
		{"top-k 1", sample.Params{Temperature: 1, TopK: 1, Seed: 4}, true},
		{"min-p", sample.Params{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 5}, true},
		{"penalty", sample.Params{Temperature: 0.8, TopK: 20, RepeatPenalty: 1.3, RepeatLastN: 16, Seed: 6}, false},
		{"greedy penalty", sample.Params{RepeatPenalty: 1.3, RepeatLastN: 16}, false},
		{"top-k off", sample.Params{Temperature: 0.8, Seed: 8}, false},
	} {
		// Plain decoding's reply and follow-up turn: the Chain hook keeps
		// them off the chain.
		r := slots.Request{Prompt: prompt, MaxTokens: 20, Params: c.p, Chain: func() bool { return false }}
		plain, _, n := chained(r)
		if n != 0 {
			t.Fatalf("%s: %d steps chained with the chain off", c.name, n)
		}
		turn2 := slices.Concat(prompt, plain[:19], []int32{7, 8})
		plain2, _, _ := chained(slots.Request{Prompt: turn2, MaxTokens: 8, Params: c.p, Chain: r.Chain})
		for _, mode := range []struct {
			name  string
			chain func(i int) bool
		}{
			{"always", func(int) bool { return true }},
			{"off midway", func(i int) bool { return i < 6 || i > 11 }},
			{"toggled", func(i int) bool { return i%5 < 3 }},
		} {
			what := fmt.Sprintf("%s, chain %s", c.name, mode.name)
			asked, steps := 0, 0
			r.Chain = func() bool { asked++; return mode.chain(asked - 1) }
			r.Step = func(*infer.Model) { steps++ }
			got, _, n := chained(r)
			if !slices.Equal(got, plain) {
				t.Fatalf("%s: tokens\n%v\nplain\n%v", what, got, plain)
			}
			if n+steps != 19 || c.chain && n < 8 || !c.chain && n != 0 {
				t.Fatalf("%s: %d of 19 steps chained, %d announced", what, n, steps)
			}
			got2, res, _ := chained(slots.Request{Prompt: turn2, MaxTokens: 8, Params: c.p})
			if res.CachedTokens != len(prompt)+19 || !slices.Equal(got2, plain2) {
				t.Fatalf("%s: the second turn %v with %d cached tokens, want %v with %d", what, got2, res.CachedTokens, plain2, len(prompt)+19)
			}
		}
		if !c.chain {
			continue
		}
		for _, off := range []slots.Request{{Logprobs: true}, {TopLogits: 4}} {
			off.Prompt, off.MaxTokens, off.Params = prompt, 20, c.p
			if got, _, n := chained(off); n != 0 || !slices.Equal(got, plain) {
				t.Fatalf("%s: a request for log-probabilities %v or raw logits %d chained %d steps\n%v\nplain\n%v", c.name, off.Logprobs, off.TopLogits, n, got, plain)
			}
		}
	}

	// With prompt lookup, a step with drafts is verified in one pass of
	// the slot's tokens and the chain starts again after it: still plain
	// decoding's tokens.
	s.Close()
	wantCancelled, err := slots.Greedy(m, again, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cancelled, wantCancelled) {
		t.Fatalf("the follow-up of a cancelled generation: %v, want %v", cancelled, wantCancelled)
	}
	m.Drop()
	s, err = slots.New(slots.Options{Model: m, Slots: 1, Context: ctx, Forward: true, Drafter: spec.LookupDrafter(spec.NewNgram())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	got, res = gen(slots.Request{Prompt: quote, MaxTokens: 30})
	if !slices.Equal(got, wantQuote) {
		t.Fatalf("chained with prompt lookup\n%v\nwant\n%v", got, wantQuote)
	}
	if st := s.Stats(); st.Drafted == 0 || st.Accepted == 0 || st.Chained == 0 {
		t.Fatalf("prompt lookup: %d of %d drafts confirmed, %d steps chained: the case does not mix them", st.Accepted, st.Drafted, st.Chained)
	}
	t.Logf("prompt lookup: %d of %d drafts confirmed in %d passes, %d steps chained", res.Accepted, res.Drafted, s.Stats().Passes, s.Stats().Chained)
}
