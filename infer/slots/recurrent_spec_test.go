package slots_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// knowing drafts the reply plain decoding gives (set before each
// request), every third token of it wrong: drafts both confirmed and
// rejected.
type knowing struct {
	prompt int
	reply  []int32
	buf    []int32
}

func (d *knowing) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	d.buf = d.buf[:0]
	for j := len(ctx) - d.prompt; len(d.buf) < k && j >= 0 && j < len(d.reply); j++ {
		tok := d.reply[j]
		if j%3 == 2 {
			tok = (tok + 1) % 1000
		}
		d.buf = append(d.buf, tok)
	}
	return d.buf, nil, nil
}

// On a recurrent network (synth's tiny qwen35) a one-slot scheduler that
// runs through Forward verifies drafts and takes the state back after
// those it rejects: every reply is plain decoding's, greedy and sampled.
func TestSchedulerRecurrentSpeculation(t *testing.T) {
	sh, err := synth.ArchShape("qwen35", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := synth.Write(path, synth.Options{Shape: sh, Type: gguf.Q8_0, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var prompts [][]int32
	for i := range int32(3) {
		prompts = append(prompts, []int32{300 + i, 4000 + i, 77, 9000 + i, 12})
	}
	params := []sample.Params{{}, {Temperature: 0.8, TopK: 20, Seed: 7}}
	var plain [][]int32
	run := func(drafter *knowing, perRequest bool) (out [][]int32, drafted, accepted int) {
		m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: 256, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		o := slots.Options{Model: m, Slots: 1, Context: 256, Forward: true, MaxDraft: 4}
		if drafter != nil && !perRequest {
			o.Drafter = drafter
		}
		s, err := slots.New(o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, p := range prompts {
			for _, pa := range params {
				if drafter != nil {
					drafter.prompt, drafter.reply = len(p), plain[len(out)]
				}
				r := slots.Request{Prompt: p, MaxTokens: 24, Params: pa}
				if perRequest {
					r.Drafter = drafter
				}
				st, err := s.Submit(context.Background(), r)
				if err != nil {
					t.Fatal(err)
				}
				ids, res := drain(st)
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				out = append(out, ids)
				if res.Verifies > res.Drafted || (res.Verifies == 0) != (res.Drafted == 0) {
					t.Errorf("%d drafts in %d verify passes", res.Drafted, res.Verifies)
				}
				drafted += res.Drafted
				accepted += res.Accepted
			}
		}
		return out, drafted, accepted
	}
	plain, _, _ = run(nil, false)
	for _, perRequest := range []bool{false, true} {
		got, drafted, accepted := run(&knowing{}, perRequest)
		for i := range plain {
			if !slices.Equal(got[i], plain[i]) {
				t.Errorf("the request's own drafter %v, request %d: %v, plain %v", perRequest, i, got[i], plain[i])
			}
		}
		t.Logf("the request's own drafter %v: %d of %d drafts confirmed", perRequest, accepted, drafted)
		if accepted == 0 || accepted == drafted {
			t.Errorf("the request's own drafter %v: %d of %d drafts confirmed: the test needs both outcomes", perRequest, accepted, drafted)
		}
	}
}
