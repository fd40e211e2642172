package serve_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
)

// The soak: 200 requests from 8 concurrent clients against one server of
// 4 slots, a mix of streamed and whole replies, some cancelled midway and
// some malformed. Every well-formed request gets a complete, valid answer;
// the heap stays flat; no slot, queue entry or goroutine is left behind.
func TestSoak(t *testing.T) {
	requests := 200
	if testing.Short() {
		requests = 60
	}
	s := startServer(t, "", 4)
	c := s.client()
	var next, complete, cancelled, malformed atomic.Int64
	var heapAfterWarmup uint64
	warm := sync.OnceFunc(func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heapAfterWarmup = ms.HeapInuse
	})
	goroutines := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for client := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(client), 7))
			for {
				i := next.Add(1)
				if i > int64(requests) {
					return
				}
				if i == 40 {
					warm()
				}
				if err := soakOne(t, s, c, rng, &complete, &cancelled, &malformed); err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	waitIdle(t, s)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d complete, %d cancelled, %d malformed; heap in use %d MiB after warm-up, %d MiB at the end",
		complete.Load(), cancelled.Load(), malformed.Load(), heapAfterWarmup>>20, ms.HeapInuse>>20)
	if complete.Load() == 0 || cancelled.Load() == 0 || malformed.Load() == 0 {
		t.Error("the mix lacks a kind of request")
	}
	if grown := int64(ms.HeapInuse) - int64(heapAfterWarmup); grown > 32<<20 {
		t.Errorf("the heap grew by %d MiB", grown>>20)
	}
	st := s.model.Sched.Stats()
	// A request cancelled before it had a slot is not counted as a generation.
	if st.Busy != 0 || st.Queued != 0 || st.Requests < complete.Load() || st.Requests > complete.Load()+cancelled.Load() {
		t.Errorf("scheduler after the soak: %+v (%d complete, %d cancelled)", st, complete.Load(), cancelled.Load())
	}
	// Idle keep-alive connections hold two goroutines each.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines+2*8+4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines+2*8+4 {
		t.Errorf("%d goroutines, %d before", n, goroutines)
	}
}

func soakOne(t *testing.T, s *testServer, c *oai.Client, rng *rand.Rand, complete, cancelled, malformed *atomic.Int64) error {
	prompts := []string{"Hello", "Tell me about the sea", "Why is the sky blue?", "List three colours", "Write a haiku"}
	p := oai.ChatCompletionNewParams{
		Model:       testModel,
		Messages:    []oai.ChatCompletionMessageParamUnion{oai.UserMessage(prompts[rng.IntN(len(prompts))])},
		MaxTokens:   oai.Int(int64(1 + rng.IntN(40))),
		Temperature: oai.Float(rng.Float64()),
		Seed:        oai.Int(rng.Int64()),
	}
	ctx := context.Background()
	switch k := rng.IntN(20); {
	case k < 2: // malformed
		bodies := []string{`{"messages":[{"role":"user","content":"x"}],"temperature":-1}`, `{"messages":`, `{"messages":[{"role":"x"}]}`}
		r := post(t, s, "/v1/chat/completions", bodies[rng.IntN(len(bodies))])
		if r.status != 400 || !strings.Contains(r.body, `"invalid_request_error"`) {
			return errors.New("a malformed request got " + r.body)
		}
		malformed.Add(1)
	case k < 5: // cancelled midway
		cctx, cancel := context.WithCancel(ctx)
		p.MaxTokens = oai.Int(2000)
		stream := c.Chat.Completions.NewStreaming(cctx, p)
		for n := rng.IntN(4); n >= 0 && stream.Next(); n-- {
		}
		cancel()
		stream.Close()
		cancelled.Add(1)
	case k < 12: // streamed
		p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, p)
		var acc oai.ChatCompletionAccumulator
		finish := ""
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
				finish = ch.Choices[0].FinishReason
			}
		}
		if err := stream.Err(); err != nil {
			return err
		}
		if (finish != "stop" && finish != "length") || acc.Usage.CompletionTokens < 1 || acc.Usage.CompletionTokens > p.MaxTokens.Value {
			return errors.New("a streamed reply ended with " + finish)
		}
		complete.Add(1)
	default:
		r, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			return err
		}
		if f := r.Choices[0].FinishReason; (f != "stop" && f != "length") || r.Usage.CompletionTokens < 1 || r.Usage.CompletionTokens > p.MaxTokens.Value {
			return errors.New("a reply ended with " + f)
		}
		complete.Add(1)
	}
	return nil
}
