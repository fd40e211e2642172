package slots_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

func start(t *testing.T, n, ctx int) (*slots.Scheduler, *infer.Model) {
	t.Helper()
	f, err := tinymodel.Open(tinymodel.Small(gguf.Q8_0))
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: n * ctx, Batch: 32})
	if err != nil {
		t.Fatal(err)
	}
	s, err := slots.New(slots.Options{Model: m, Slots: n, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close(); f.Close() })
	return s, m
}

func drain(st *slots.Stream) ([]int32, slots.Result) { return st.Collect() }

// More requests than slots: all are answered, each with the tokens
// slots.Greedy gives it alone, and a follow-up that extends one goes to
// the slot that holds it.
func TestSchedulerGreedyAndPrefix(t *testing.T) {
	s, m := start(t, 2, 64)
	prompts := [][]int32{{1, 2, 3}, {4, 5, 6, 7}, {8, 9}, {10, 11, 12, 13, 14}, {15}}
	var want [][]int32
	for _, p := range prompts {
		g, err := slots.Greedy(m, p, 6, false)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, g)
	}
	got := make([][]int32, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		st, err := s.Submit(context.Background(), slots.Request{Prompt: p, MaxTokens: 6})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			ids, res := drain(st)
			if res.Reason != "length" || res.CompletionTokens != 6 {
				t.Errorf("prompt %d: %+v", i, res)
			}
			got[i] = ids
		})
	}
	wg.Wait()
	for i := range prompts {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("prompt %d: %v, alone %v", i, got[i], want[i])
		}
	}
	// prompts[4] + its reply + more: the slot that ran it holds 1+5 tokens.
	next := append(append([]int32{15}, want[4][:5]...), 20, 21)
	st, err := s.Submit(context.Background(), slots.Request{Prompt: next, MaxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, res := drain(st); res.CachedTokens != 6 {
		t.Errorf("the follow-up reused %d tokens, want 6", res.CachedTokens)
	}
}

func TestSchedulerCancelAndBan(t *testing.T) {
	s, _ := start(t, 1, 500) // room for a reply that outlasts the cancel
	ctx, cancel := context.WithCancel(context.Background())
	long, err := s.Submit(ctx, slots.Request{Prompt: []int32{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := s.Submit(ctx, slots.Request{Prompt: []int32{3}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, res := drain(long); res.Reason != "cancelled" {
		t.Errorf("the running request: %+v", res)
	}
	if _, res := drain(queued); res.Reason != "cancelled" {
		t.Errorf("the queued request: %+v", res)
	}
	// Banned tokens are never sampled, at any temperature.
	ban := []int32{}
	for id := int32(0); id < 90; id++ {
		ban = append(ban, id)
	}
	st, err := s.Submit(context.Background(), slots.Request{Prompt: []int32{5}, MaxTokens: 20, Ban: ban,
		Params: sample.Params{Temperature: 1, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := drain(st)
	for _, id := range ids {
		if id < 90 {
			t.Fatalf("banned token %d sampled", id)
		}
	}
	if st := s.Stats(); st.Busy != 0 || st.Queued != 0 {
		t.Errorf("stats: %+v", st)
	}
	for _, c := range []struct {
		prompt []int32
		want   error
	}{{nil, infer.ErrBadShape}, {make([]int32, 500), slots.ErrPromptTooLong}, {[]int32{-3}, infer.ErrBadShape}} {
		if _, err := s.Submit(context.Background(), slots.Request{Prompt: c.prompt}); !errors.Is(err, c.want) {
			t.Errorf("prompt of %d: %v, want %v", len(c.prompt), err, c.want)
		}
	}
}
