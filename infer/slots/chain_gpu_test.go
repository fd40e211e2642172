//go:build cgo && !nogpu

package slots_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// A lone generation on a model that chains runs its steps chained (the
// scheduler's fast path) and gets what plain steps give: greedy, the
// tokens Model.Greedy gives; sampled with top-k, the tokens the same
// request gets when it asks for log-probabilities (which keeps it off the
// chain); and the cache the chain leaves serves a follow-up as plain
// decoding's would. A request that runs into the end of its slot stops
// there, as plainly. With prompt lookup, drafts are verified between
// chained steps, and the tokens are still plain decoding's.
func TestSchedulerChainsALoneGeneration(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q1_0)
	cfg.Tied = false
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
		t.Fatal("no chain on a Q1_0 Qwen3 model on the GPU")
	}
	// The references first: they run on the cache the scheduler's slot
	// then takes over.
	prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}
	full, err := m.Greedy(prompt, ctx-len(prompt)+1) // to the end of the slot
	if err != nil {
		t.Fatal(err)
	}
	want := full[:20]
	next := slices.Concat(prompt, want[:19], []int32{7, 8})
	wantNext, err := m.Greedy(next, 6)
	if err != nil {
		t.Fatal(err)
	}
	s, err := slots.New(slots.Options{Model: m, Slots: 1, Context: ctx})
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
	got, _ := gen(slots.Request{Prompt: prompt, MaxTokens: 20})
	if !slices.Equal(got, want) {
		t.Fatalf("chained greedy\n%v\nwant\n%v", got, want)
	}
	if n := s.Stats().Chained; n < 15 {
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
	got, res = gen(slots.Request{Prompt: again, MaxTokens: 4})
	if res.CachedTokens != len(prompt)+len(cut)-1 {
		t.Fatalf("after a cancel the follow-up reused %d tokens, want %d", res.CachedTokens, len(prompt)+len(cut)-1)
	}
	cancelled := got

	sampled := slots.Request{Prompt: prompt, MaxTokens: 20, Params: sample.Params{Temperature: 0.9, TopK: 8, Seed: 5}}
	before := s.Stats().Chained
	got, _ = gen(sampled)
	if s.Stats().Chained == before {
		t.Fatal("a top-k sampled request did not run chained")
	}
	sampled.Logprobs = true
	before = s.Stats().Chained
	plain, _ := gen(sampled)
	if s.Stats().Chained != before {
		t.Fatal("a request for log-probabilities ran chained")
	}
	if !slices.Equal(got, plain) {
		t.Fatalf("chained top-k sampling\n%v\nplain\n%v", got, plain)
	}
	// A client that allows chaining every other step (profiling between
	// them): each decoding step either ran chained or was announced to
	// Step, and the tokens are the same. Raw logits are not chained.
	sampled.Logprobs = false
	asked, steps := 0, 0
	sampled.Chain = func() bool { asked++; return asked%2 == 0 }
	sampled.Step = func(*infer.Model) { steps++ }
	before = s.Stats().Chained
	alternate, _ := gen(sampled)
	chained := int(s.Stats().Chained - before)
	if !slices.Equal(alternate, plain) || chained == 0 || steps == 0 || chained+steps != 19 {
		t.Fatalf("every other step chained: %d chained, %d announced of 19\n%v\nplain\n%v", chained, steps, alternate, plain)
	}
	sampled.Chain, sampled.Step, sampled.TopLogits = nil, nil, 4
	before = s.Stats().Chained
	if withLogits, _ := gen(sampled); s.Stats().Chained != before || !slices.Equal(withLogits, plain) {
		t.Fatalf("a request for raw logits: chained %d steps\n%v\nplain\n%v", s.Stats().Chained-before, withLogits, plain)
	}
	got, res = gen(slots.Request{Prompt: prompt})
	if res.Reason != "length" || !slices.Equal(got, full) {
		t.Fatalf("to the end of the slot: %d tokens (%s), want %d\n%v\n%v", len(got), res.Reason, len(full), got, full)
	}

	// With prompt lookup, a step with drafts is verified in one pass of
	// the slot's tokens (the GPU backend has no passes over rows) and the
	// chain starts again after it: still plain decoding's tokens.
	s.Close()
	wantCancelled, err := m.Greedy(again, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cancelled, wantCancelled) {
		t.Fatalf("the follow-up of a cancelled generation: %v, want %v", cancelled, wantCancelled)
	}
	quote := slices.Concat(prompt, full[:30], prompt, full[:4])
	wantQuote, err := m.Greedy(quote, 30)
	if err != nil {
		t.Fatal(err)
	}
	s, err = slots.New(slots.Options{Model: m, Slots: 1, Context: ctx, Drafter: spec.LookupDrafter(spec.NewNgram())})
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
