package slots_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// startWith is start with options of the test's choosing.
func startWith(t *testing.T, o slots.Options, ctx int) *slots.Scheduler {
	t.Helper()
	f, err := tinymodel.Open(tinymodel.Small(gguf.Q8_0))
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: o.Slots * ctx, Batch: 32})
	if err != nil {
		t.Fatal(err)
	}
	o.Model, o.Context = m, ctx
	s, err := slots.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close(); f.Close() })
	return s
}

// With prompt lookup, every request gets plain decoding's tokens, greedy
// and sampled alike, while requests run side by side; and the drafts were
// verified, with some confirmed (the prompts quote what the model goes on
// to say, and a small random model repeats itself).
func TestSchedulerSpeculationKeepsTokens(t *testing.T) {
	var prompts [][]int32
	for i := range int32(6) {
		p := []int32{3 + i, 40 + i, 7, 90 + i, 11}
		prompts = append(prompts, slices.Concat(p, p, p))
	}
	params := []sample.Params{{}, {Temperature: 0.8, TopK: 20, Seed: 7}}
	run := func(o slots.Options) (out [][]int32, drafted, accepted int) {
		s := startWith(t, o, 128)
		out = make([][]int32, len(prompts)*len(params))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, p := range prompts {
			for k, pa := range params {
				st, err := s.Submit(context.Background(), slots.Request{Prompt: p, MaxTokens: 40, Params: pa})
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					ids, res := drain(st)
					mu.Lock()
					defer mu.Unlock()
					out[i*len(params)+k] = ids
					if res.Err != nil {
						t.Errorf("request %d: %v", i, res.Err)
					}
					drafted += res.Drafted
					accepted += res.Accepted
				})
			}
		}
		wg.Wait()
		if st := s.Stats(); st.Drafted != int64(drafted) || st.Accepted != int64(accepted) {
			t.Errorf("stats count %d/%d drafts, the results %d/%d", st.Accepted, st.Drafted, accepted, drafted)
		}
		return out, drafted, accepted
	}
	plain, d0, _ := run(slots.Options{Slots: 3})
	for _, maxDraft := range []int{1, 3, 8} {
		got, drafted, accepted := run(slots.Options{Slots: 3, Drafter: spec.LookupDrafter(spec.NewNgram()), MaxDraft: maxDraft})
		for i := range plain {
			if !slices.Equal(got[i], plain[i]) {
				t.Errorf("max draft %d, request %d: %v, plain %v", maxDraft, i, got[i], plain[i])
			}
		}
		t.Logf("max draft %d: %d of %d drafts confirmed", maxDraft, accepted, drafted)
		if drafted == 0 || accepted == 0 {
			t.Errorf("max draft %d: %d of %d drafts confirmed: speculation did not run", maxDraft, accepted, drafted)
		}
	}
	if d0 != 0 {
		t.Errorf("without lookup %d tokens were drafted", d0)
	}
}
