//go:build cgo && !nogpu

package slots_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// A lone generation on the hybrid qwen35 network runs chained too: the
// tokens are Model.Greedy's, and the chain's pass in flight, given back
// when it stops, is taken back from the recurrent state as well, so that a
// follow-up reuses the cache (and the state) as after plain decoding, after
// a finished and after a cancelled generation.
func TestSchedulerChainsAQwen35Generation(t *testing.T) {
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
		t.Fatal("no chain on a Q1_0 qwen35 model on the GPU")
	}
	prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}
	full, err := m.Greedy(prompt, 40)
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
	gotNext, res := gen(slots.Request{Prompt: next, MaxTokens: 6})
	if res.CachedTokens != len(prompt)+19 || !slices.Equal(gotNext, wantNext) {
		t.Fatalf("follow-up: %v with %d cached tokens, want %v with %d", gotNext, res.CachedTokens, wantNext, len(prompt)+19)
	}
	// Cancelled while chained.
	cctx, cancel := context.WithCancel(context.Background())
	st, err := s.Submit(cctx, slots.Request{Prompt: prompt, MaxTokens: 40})
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
	// Its reference runs once the scheduler is done with the cache.
	s.Close()
	wantAgain, err := m.Greedy(again, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, wantAgain) {
		t.Fatalf("after a cancel the follow-up gave %v, want %v", got, wantAgain)
	}
}
