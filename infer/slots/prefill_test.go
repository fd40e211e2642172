package slots_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/internal/toyrec"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// loadModel loads tinymodel's small model on the CPU, or with toy the
// toy recurrent one, with a context of ctx and batches of 32.
func loadModel(t *testing.T, toy bool, ctx int) *infer.Model {
	t.Helper()
	cfg, backend := tinymodel.Small(gguf.Q8_0), "cpu"
	if toy {
		cfg = toyrec.Config(tinymodel.Config{Layers: 1, Embed: 64, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 128,
			Vocab: 300, Context: 512, Type: gguf.F32, Tied: true, Seed: 5, RopeBase: 1e4})
		backend = toyrec.Backend
	}
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: backend, Threads: 2, Context: ctx, Batch: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); f.Close() })
	return m
}

// forwardOn starts a one-slot scheduler on m whose passes run through
// Forward, with the model's whole context.
func forwardOn(t *testing.T, m *infer.Model) *slots.Scheduler {
	t.Helper()
	s, err := slots.New(slots.Options{Model: m, Slots: 1, Context: m.Context(), Forward: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func seqIDs(n int, seed int32) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = (seed*31 + int32(i)*17) % 96
	}
	return ids
}

// progress runs r and returns its tokens, result and the Prefill reports.
func progress(t *testing.T, s *slots.Scheduler, ctx context.Context, r slots.Request) ([]int32, slots.Result, []slots.Prefill) {
	t.Helper()
	var mu sync.Mutex
	var reports []slots.Prefill
	inner := r.Prefill
	r.Prefill = func(p slots.Prefill) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
		if inner != nil {
			inner(p)
		}
	}
	st, err := s.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	ids, res := drain(st)
	mu.Lock()
	defer mu.Unlock()
	return ids, res, reports
}

// A prompt is read in the chunks asked for, each reported; a follow-up
// reports what the cache held; the tokens are plain decoding's whatever
// the chunks.
func TestSchedulerPrefillChunks(t *testing.T) {
	prompt := seqIDs(100, 1)
	for _, c := range []struct {
		name  string
		chunk time.Duration
		want  []int // Done after each pass
	}{
		{"a batch a pass", 0, []int{32, 64, 96, 100}},
		// Far slower than asked: 16 first, then the smallest chunk.
		{"a nanosecond", time.Nanosecond, []int{16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 100}},
		// Far faster than asked: 16 first, then whole batches.
		{"an hour", time.Hour, []int{16, 48, 80, 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := loadModel(t, false, 256)
			want, err := slots.Greedy(m, prompt, 5, false)
			if err != nil {
				t.Fatal(err)
			}
			s := forwardOn(t, m)
			ids, res, reports := progress(t, s, context.Background(), slots.Request{Prompt: prompt, MaxTokens: 5, Chunk: c.chunk})
			if !slices.Equal(ids, want) || res.Reason != "length" {
				t.Errorf("%v (%s), plain decoding %v", ids, res.Reason, want)
			}
			var done []int
			for i, p := range reports {
				if p.Total != len(prompt) || p.Shared != 0 || p.Kept != 0 {
					t.Errorf("report %d: %+v", i, p)
				}
				done = append(done, p.Done)
			}
			if want := append([]int{0}, c.want...); !slices.Equal(done, want) {
				t.Errorf("read %v, want %v", done, want)
			}
			// The follow-up: the prompt, the reply but its last token, more.
			next := slices.Concat(prompt, ids[:4], []int32{7, 8})
			_, res, reports = progress(t, s, context.Background(), slots.Request{Prompt: next, MaxTokens: 1, Chunk: c.chunk})
			if res.CachedTokens != 104 || reports[0] != (slots.Prefill{Shared: 104, Kept: 104, Total: 2}) ||
				reports[len(reports)-1].Done != 2 {
				t.Errorf("follow-up: cached %d, reports %+v", res.CachedTokens, reports)
			}
		})
	}
}

// Cancelling a request while its prompt is read stops the reading after
// the chunk under way; the slot keeps what was read, and the same prompt
// asked again reads only the rest and decodes as plain decoding does.
func TestSchedulerPrefillCancel(t *testing.T) {
	m := loadModel(t, false, 256)
	prompt := seqIDs(120, 2)
	want, err := slots.Greedy(m, prompt, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	s := forwardOn(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	stopAt := func(p slots.Prefill) {
		if p.Done >= 24 {
			cancel()
		}
	}
	ids, res, reports := progress(t, s, ctx, slots.Request{Prompt: prompt, MaxTokens: 4, Chunk: time.Nanosecond, Prefill: stopAt})
	if res.Reason != "cancelled" || len(ids) != 0 || reports[len(reports)-1].Done != 24 {
		t.Fatalf("cancelled at 24 tokens: %d tokens, %+v, reports %+v", len(ids), res, reports)
	}
	var held int
	if err := s.State(func(seq *infer.Sequence) error { held = seq.Len(); return nil }); err != nil {
		t.Fatal(err)
	}
	if held != 24 {
		t.Errorf("the slot holds %d tokens, the reading got to 24", held)
	}
	ids, res, _ = progress(t, s, context.Background(), slots.Request{Prompt: prompt, MaxTokens: 4})
	if res.CachedTokens != 24 || !slices.Equal(ids, want) {
		t.Errorf("asked again: %v with %d cached, plain decoding %v", ids, res.CachedTokens, want)
	}
}

// Marks snapshot a recurrent model's state as the reading passes them: a
// prompt that leaves the first one's at a later position resumes at the
// latest mark before, and without marks reads again from the start; the
// tokens are plain decoding's either way.
func TestSchedulerMarks(t *testing.T) {
	first := seqIDs(60, 3)
	second := slices.Concat(first[:30], seqIDs(20, 4)) // edits at 30
	for _, c := range []struct {
		name     string
		marks    []int
		wantKept int
	}{
		{"no marks", nil, 0},
		{"turn boundaries", []int{20, 40}, 20},
		{"a mark at the edit", []int{30}, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := loadModel(t, true, 256)
			want, err := slots.Greedy(m, second, 6, false)
			if err != nil {
				t.Fatal(err)
			}
			m.Drop()
			s := forwardOn(t, m)
			if _, res, _ := progress(t, s, context.Background(), slots.Request{Prompt: first, MaxTokens: 3, Marks: c.marks}); res.Err != nil {
				t.Fatal(res.Err)
			}
			var snaps []int
			s.State(func(seq *infer.Sequence) error { snaps = seq.Model().Snapshots(); return nil })
			if !slices.Equal(snaps, c.marks) && (len(snaps) > 0 || len(c.marks) > 0) {
				t.Errorf("snapshots at %v, marks %v", snaps, c.marks)
			}
			ids, _, reports := progress(t, s, context.Background(), slots.Request{Prompt: second, MaxTokens: 6})
			if p := reports[0]; p.Shared != 30 || p.Kept != c.wantKept {
				t.Errorf("shared %d, kept %d, want 30 and %d", p.Shared, p.Kept, c.wantKept)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("%v, plain decoding %v", ids, want)
			}
		})
	}
}

// State saves the slot's cache and restores it: after a Reset the
// conversation's next turn reads it all again; restored, it reads only
// what is new and decodes as plain decoding does.
func TestSchedulerState(t *testing.T) {
	m := loadModel(t, false, 256)
	prompt := seqIDs(40, 5)
	reply, err := slots.Greedy(m, prompt, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	next := slices.Concat(prompt, reply[:3], []int32{9, 10})
	want, err := slots.Greedy(m, next, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	s := forwardOn(t, m)
	if ids, _, _ := progress(t, s, context.Background(), slots.Request{Prompt: prompt, MaxTokens: 4}); !slices.Equal(ids, reply) {
		t.Fatalf("%v, plain decoding %v", ids, reply)
	}
	var saved bytes.Buffer
	fp := m.StateFingerprint("tiny")
	if err := s.State(func(seq *infer.Sequence) error { return seq.WriteState(&saved, fp) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		state   func(seq *infer.Sequence) error
		wantErr error
		cached  int
	}{
		{"reset", func(seq *infer.Sequence) error { seq.Reset(); return nil }, nil, 0},
		{"restored", func(seq *infer.Sequence) error {
			st, err := infer.ReadState(bytes.NewReader(saved.Bytes()), int64(saved.Len()))
			if err != nil {
				return err
			}
			return st.Restore(seq)
		}, nil, 43},
		{"damaged", func(seq *infer.Sequence) error {
			b := slices.Clone(saved.Bytes())
			b[len(b)-1] ^= 1
			st, err := infer.ReadState(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				return err
			}
			return st.Restore(seq)
		}, infer.ErrBadState, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := s.State(c.state); !errors.Is(err, c.wantErr) {
				t.Fatalf("State: %v, want %v", err, c.wantErr)
			}
			ids, res, _ := progress(t, s, context.Background(), slots.Request{Prompt: next, MaxTokens: 4})
			if res.CachedTokens != c.cached || !slices.Equal(ids, want) {
				t.Errorf("%v with %d cached, want %v with %d", ids, res.CachedTokens, want, c.cached)
			}
		})
	}
	s.Close()
	if err := s.State(func(*infer.Sequence) error { return nil }); !errors.Is(err, slots.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	batched, _ := start(t, 2, 64)
	if err := batched.State(func(*infer.Sequence) error { return nil }); !errors.Is(err, slots.ErrNoState) {
		t.Errorf("two slots over rows: %v, want ErrNoState", err)
	}
}

// Per token: the raw logits asked for, most likely first (the greedy
// token's first), the time sampling took, summed in the result; a plain
// step is announced to the Step hook before it runs.
func TestSchedulerTokenDetails(t *testing.T) {
	m := loadModel(t, false, 256)
	prompt := seqIDs(30, 6)
	want, err := slots.Greedy(m, prompt, 6, false)
	if err != nil {
		t.Fatal(err)
	}
	s := forwardOn(t, m)
	for _, c := range []struct {
		top   int
		chain bool
	}{{0, true}, {3, true}, {5, false}} {
		steps, asked := 0, 0
		st, err := s.Submit(context.Background(), slots.Request{Prompt: prompt, MaxTokens: 6, TopLogits: c.top,
			Chain: func() bool { asked++; return c.chain },
			Step:  func(*infer.Model) { steps++ }})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		var sampling time.Duration
		for {
			toks, done := st.Next()
			for _, tok := range toks {
				ids = append(ids, tok.ID)
				sampling += tok.Sampling
				if len(tok.Logits) != c.top {
					t.Errorf("top %d: %d logits", c.top, len(tok.Logits))
				} else if c.top > 0 && (tok.Logits[0].ID != tok.ID ||
					!slices.IsSortedFunc(tok.Logits, func(a, b sample.Logit) int { return cmp.Compare(b.Logit, a.Logit) })) {
					t.Errorf("top %d: token %d, logits %v", c.top, tok.ID, tok.Logits)
				}
			}
			if done {
				break
			}
		}
		res := st.Result()
		if !slices.Equal(ids, want) || res.Sampling != sampling || sampling <= 0 {
			t.Errorf("top %d: %v, plain decoding %v; sampling %v, the tokens' %v", c.top, ids, want, res.Sampling, sampling)
		}
		// The CPU cannot chain: every step after the prompt's runs plainly.
		if steps != 5 {
			t.Errorf("top %d: Step called %d times for 5 plain steps", c.top, steps)
		}
		if c.top > 0 && asked > 0 {
			t.Errorf("top %d: Chain asked %d times of a request that wants logits", c.top, asked)
		}
	}
}

// A Lockstep request's next step waits for its reader: each Next brings
// one token, and stopped after k of them, the slot holds no token past the
// k the reader saw; a reader that leaves without reading wakes the
// scheduler too. Alone or beside a request that does not wait, the tokens
// are plain decoding's.
func TestSchedulerLockstep(t *testing.T) {
	prompt := seqIDs(20, 8)
	other := seqIDs(25, 9)
	for _, c := range []struct {
		name  string
		slots int
	}{{"alone, through Forward", 0}, {"beside another, over rows", 2}} {
		t.Run(c.name, func(t *testing.T) {
			m := loadModel(t, false, 256)
			want, err := slots.Greedy(m, prompt, 12, false)
			if err != nil {
				t.Fatal(err)
			}
			wantOther, err := slots.Greedy(m, other, 30, false)
			if err != nil {
				t.Fatal(err)
			}
			var s *slots.Scheduler
			if c.slots == 0 {
				s = forwardOn(t, m)
			} else {
				if s, err = slots.New(slots.Options{Model: m, Slots: c.slots, Context: 128}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
			}
			var busy *slots.Stream
			if c.slots > 1 {
				if busy, err = s.Submit(context.Background(), slots.Request{Prompt: other, MaxTokens: 30}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			st, err := s.Submit(ctx, slots.Request{Prompt: prompt, MaxTokens: 40, Lockstep: true})
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			for len(got) < 12 {
				toks, done := st.Next()
				if len(toks) != 1 || done {
					t.Fatalf("after %d tokens: %d more, done %v", len(got), len(toks), done)
				}
				got = append(got, toks[0].ID)
			}
			cancel()
			rest, res := drain(st)
			if !slices.Equal(got, want) || res.Reason != "cancelled" || len(rest) > 1 || res.CompletionTokens > 13 {
				t.Errorf("%v then %v, %+v; plain decoding %v", got, rest, res, want)
			}
			if busy != nil {
				if ids, _ := drain(busy); !slices.Equal(ids, wantOther) {
					t.Errorf("beside it: %v, plain decoding %v", ids, wantOther)
				}
				return
			}
			var held int
			s.State(func(seq *infer.Sequence) error { held = seq.Len(); return nil })
			if held > len(prompt)+12 {
				t.Errorf("the slot holds %d tokens, the reader saw %d after the prompt's %d", held, len(got), len(prompt))
			}
			// Never read: cancelling wakes the waiting scheduler.
			ctx, cancel = context.WithCancel(context.Background())
			st, err = s.Submit(ctx, slots.Request{Prompt: prompt, MaxTokens: 40, Lockstep: true})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			cancel()
			if ids, res := drain(st); res.Reason != "cancelled" || len(ids) > 1 {
				t.Errorf("unread: %v, %+v", ids, res)
			}
		})
	}
}
