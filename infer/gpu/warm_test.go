package gpu_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// reply runs a reply as the engine does: prompt, then n tokens, greedy or
// sampled (sample.Bonsai, bonsai's default), through a chain where chained.
func reply(t *testing.T, m *infer.Model, prompt []int32, n int, sampled, chained bool) {
	t.Helper()
	s := infer.NewSequence(m)
	var smp *sample.Sampler
	if sampled {
		var err error
		if smp, err = sample.New(sample.Bonsai(1)); err != nil {
			t.Fatal(err)
		}
	}
	var c *infer.Chain
	if chained {
		if sampled {
			c = s.NewSampledChain(smp)
		} else {
			c = s.NewChain()
		}
		if c == nil {
			t.Fatal("the model does not chain")
		}
	}
	if _, err := s.Prefill(prompt, nil); err != nil {
		t.Fatal(err)
	}
	pick := func(logits []float32) int32 {
		if smp != nil {
			return smp.Sample(logits)
		}
		return gpu.ArgmaxOf(logits)
	}
	tok := pick(m.Logits())
	for range n {
		if c != nil {
			next, err := c.Next(tok)
			if err != nil {
				t.Fatal(err)
			}
			tok = next
			continue
		}
		if err := s.Append(tok); err != nil {
			t.Fatal(err)
		}
		tok = pick(m.Logits())
	}
	if c != nil {
		if _, _, err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFirstReplyCreatesNothing: after Load (its trial pass and warm-up)
// the first reply, greedy or sampled, chained or not, on a short prompt or
// on one long enough for several passes, chunked DeltaNet and the longer
// attention classes, creates no pipeline (~0.2 s each on an H100), bind
// group or buffer: the first reply of a fresh process runs as the second.
// The bench case loads as `bonsai bench -p 0 -n 128 --first` does (the
// context the test's 128 tokens, passes of one token).
func TestFirstReplyCreatesNothing(t *testing.T) {
	short := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}
	long := make([]int32, 150)
	for i := range long {
		long[i] = int32(1 + 7*i%90)
	}
	for _, tc := range []struct {
		model            string
		sampled, chained bool
		prompt           []int32
		bench            bool
	}{
		{"qwen3", false, true, short, false},
		{"qwen3", true, true, short, false},
		{"qwen3", false, false, long, false},
		{"qwen3", true, true, long, false},
		{"qwen3", false, true, []int32{1}, true},
		{"qwen3", true, true, []int32{1}, true},
		{"qwen35", false, false, short, false},
		{"qwen35", true, false, long, false},
	} {
		name := tc.model
		for _, on := range []struct {
			b    bool
			name string
		}{{tc.sampled, "sampled"}, {tc.chained, "chained"}} {
			if on.b {
				name += "/" + on.name
			}
		}
		if len(tc.prompt) > 64 {
			name += "/long"
		}
		if tc.bench {
			name += "/bench"
		}
		t.Run(name, func(t *testing.T) {
			var m *infer.Model
			n := 40
			if tc.model == "qwen3" {
				cfg := tinymodel.Small(gguf.Q1_0)
				cfg.Tied = false // a Q1_0 embedding: the chain looks its tokens up on the device
				batch := 64
				if tc.bench {
					cfg.Context, batch, n = 128, 1, 126
				}
				m = loadBatch(t, "gpu", cfg, batch)
			} else {
				m = loadQwen35(t, "gpu", gguf.Q1_0)
			}
			b := m.Backend().(*gpu.Backend)
			before := b.Created()
			gpu.TraceCreated(b)
			reply(t, m, tc.prompt, n, tc.sampled, tc.chained)
			after := b.Created()
			if after.Pipelines != before.Pipelines || after.BindGroups != before.BindGroups || after.Buffers != before.Buffers {
				t.Errorf("the first reply created %d pipelines, %d bind groups and %d buffers (%d bytes):\n%s",
					after.Pipelines-before.Pipelines, after.BindGroups-before.BindGroups, after.Buffers-before.Buffers,
					after.BufferBytes-before.BufferBytes, strings.Join(after.Labels, "\n"))
			}
		})
	}
}

// TestBatchedRepliesCreateNothing: a scheduler whose slots share one pass
// (infer/slots, as bonsai serve runs them) warms those passes when it
// starts (Model.WarmRows), so the first replies that run together, their
// prompts read beside each other's decoding, create no pipeline or buffer
// either. Bind groups are not counted: making one compiles nothing, and a
// slot's state gets its own on its first passes.
func TestBatchedRepliesCreateNothing(t *testing.T) {
	for _, model := range []string{"qwen3", "qwen35"} {
		t.Run(model, func(t *testing.T) {
			var m *infer.Model
			if model == "qwen3" {
				cfg := tinymodel.Small(gguf.Q1_0)
				cfg.Context = 256
				m = loadBatch(t, "gpu", cfg, 64)
			} else {
				m = loadQwen35(t, "gpu", gguf.Q1_0)
			}
			s, err := slots.New(slots.Options{Model: m, Slots: 4, Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.Batched() {
				t.Fatal("the scheduler does not batch on the GPU")
			}
			b := m.Backend().(*gpu.Backend)
			before := b.Created()
			gpu.TraceCreated(b)
			var wg sync.WaitGroup
			for i := range 4 {
				prompt := make([]int32, 3+9*i) // one to four rows' kernels' worth
				for j := range prompt {
					prompt[j] = int32(1 + (7*j+i)%90)
				}
				st, err := s.Submit(context.Background(), slots.Request{Prompt: prompt, MaxTokens: 12})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, done := st.Next(); !done; _, done = st.Next() {
					}
				}()
			}
			wg.Wait()
			after := b.Created()
			if after.Pipelines != before.Pipelines || after.Buffers != before.Buffers {
				t.Errorf("the first batched replies created %d pipelines and %d buffers (%d bytes):\n%s",
					after.Pipelines-before.Pipelines, after.Buffers-before.Buffers,
					after.BufferBytes-before.BufferBytes, strings.Join(after.Labels, "\n"))
			}
		})
	}
}
