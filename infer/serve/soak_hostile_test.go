package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/bonsai-chat/bonsai/infer/serve"
)

// maxGap bounds the time between two chunks of a well-behaved stream
// while hostile clients run: a step of the test model takes milliseconds,
// and a 75,000-value enum made gaps of over a second.
const maxGap = 2 * time.Second

// The hostile soak: 8 well-behaved clients stream replies while hostile
// ones send, in a loop, what issue 30's items 1-5 found: thousands of tool
// messages, huge tokenize requests of new words, one-word megabyte
// messages, a 75,000-value enum, and bodies sent a byte at a time. Every
// well-behaved request completes with gaps under maxGap, every slow body
// is cut, and the heap in use comes back to within 20 % of where it
// started once the hostile clients stop.
func TestSoakHostile(t *testing.T) {
	hostileFor := 20 * time.Second
	if testing.Short() {
		hostileFor = 6 * time.Second
	}
	s := startServerOpts(t, serve.Options{BodyTimeout: 2 * time.Second},
		serve.LoadOptions{ID: testModel, Slots: 4, Context: 384, Threads: 2, Batch: 64, Backend: "cpu"}, nil)
	c := s.client()

	// Warm up what stays for good: the grammar's vocabulary, the word
	// cache's common words, the connection pools.
	post(t, s, "/v1/chat/completions", `{"max_tokens":4,"messages":[{"role":"user","content":"warm up"}],"response_format":{"type":"json_object"}}`)
	post(t, s, "/tokenize", `{"content":"warm up the tokenizer"}`)
	heapStart := heapInUse()

	ctx, stop := context.WithTimeout(context.Background(), hostileFor)
	defer stop()
	var hostile sync.WaitGroup
	var sent atomic.Int64
	loop := func(send func(i int)) {
		hostile.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				send(i)
				sent.Add(1)
			}
		})
	}
	toolMessages := hostileToolMessages(20_000)
	loop(func(int) { expectStatus(t, post(t, s, "/v1/chat/completions", toolMessages), 400) })
	loop(func(i int) { // a ~2 MB text with one new word each: the word cache must not keep it
		text := strings.Repeat("filler ", 300_000) + fmt.Sprintf("novelword%c%c", 'a'+i%26, 'a'+i/26%26)
		expectStatus(t, post(t, s, "/tokenize", `{"content":"`+text+`"}`), 200)
	})
	word := strings.Repeat("abcdefghij", 700_000)
	loop(func(int) {
		expectStatus(t, post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+word+`"}]}`), 400)
	})
	enum := hostileEnum(75_000)
	loop(func(int) { expectStatus(t, post(t, s, "/v1/chat/completions", enum), 400) })
	var cut, slow atomic.Int64
	for range 4 {
		loop(func(int) {
			slow.Add(1)
			if slowBody(s, 500*time.Millisecond, 20*time.Second) {
				cut.Add(1)
			}
		})
	}

	// The well-behaved clients, until the hostile ones stop.
	var good sync.WaitGroup
	var completed atomic.Int64
	var worst atomic.Int64
	for client := range 8 {
		good.Go(func() {
			for ctx.Err() == nil {
				gap, err := streamGaps(c, client)
				if err != nil {
					t.Errorf("client %d: %v", client, err)
					return
				}
				completed.Add(1)
				for {
					w := worst.Load()
					if int64(gap) <= w || worst.CompareAndSwap(w, int64(gap)) {
						break
					}
				}
			}
		})
	}
	good.Wait()
	hostile.Wait()
	waitIdle(t, s)
	heapEnd := heapInUse()
	t.Logf("%d well-behaved replies, worst gap %s; %d hostile requests, %d of %d slow bodies cut; heap in use %d MiB at the start, %d MiB after",
		completed.Load(), time.Duration(worst.Load()), sent.Load(), cut.Load(), slow.Load(), heapStart>>20, heapEnd>>20)
	if completed.Load() < 8 {
		t.Errorf("only %d well-behaved replies", completed.Load())
	}
	if gap := time.Duration(worst.Load()); gap > maxGap {
		t.Errorf("a well-behaved stream waited %s between two chunks (bound %s)", gap, maxGap)
	}
	if cut.Load() != slow.Load() {
		t.Errorf("%d of %d slow bodies were cut", cut.Load(), slow.Load())
	}
	if heapEnd > heapStart+heapStart/5 {
		t.Errorf("the heap in use went from %d MiB to %d MiB", heapStart>>20, heapEnd>>20)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

func expectStatus(t *testing.T, r answer, status int) {
	t.Helper()
	if r.status != status {
		t.Errorf("a hostile request got %d, not %d: %.200s", r.status, status, r.body)
	}
}

func hostileToolMessages(n int) string {
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"user","content":"x"}`)
	for range n {
		b.WriteString(`,{"role":"tool","content":"ok"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

func hostileEnum(n int) string {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("%x", uint32(i)*2654435761)
	}
	enum, _ := json.Marshal(vals)
	return `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"e","schema":{"enum":` + string(enum) + `}}}}`
}

// slowBody sends a request body a byte every interval and reports whether
// the server cut it (answered or closed) before limit.
func slowBody(s *testServer, every, limit time.Duration) bool {
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.root, "http://"))
	if err != nil {
		return false
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{")
	closed := make(chan struct{})
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := conn.Read(buf); err != nil {
				close(closed)
				return
			}
		}
	}()
	deadline := time.After(limit)
	for {
		select {
		case <-closed:
			return true
		case <-deadline:
			return false
		case <-time.After(every):
			conn.Write([]byte(" "))
		}
	}
}

// streamGaps streams one reply and returns the longest wait between two
// of its chunks.
func streamGaps(c *oai.Client, client int) (time.Duration, error) {
	p := oai.ChatCompletionNewParams{
		Model:     testModel,
		Messages:  []oai.ChatCompletionMessageParamUnion{oai.UserMessage(fmt.Sprintf("Tell me a story, number %d", client))},
		MaxTokens: oai.Int(30), Temperature: oai.Float(0.8),
	}
	stream := c.Chat.Completions.NewStreaming(context.Background(), p)
	defer stream.Close()
	var worst time.Duration
	var last time.Time
	finish := ""
	for n := 0; stream.Next(); n++ {
		// The first chunk (the role) goes out before the request waits
		// for a slot and its prompt: gaps count from the first token.
		now := time.Now()
		if n >= 2 {
			worst = max(worst, now.Sub(last))
		}
		last = now
		if ch := stream.Current(); len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
			finish = ch.Choices[0].FinishReason
		}
	}
	if err := stream.Err(); err != nil {
		return 0, err
	}
	if finish != "stop" && finish != "length" {
		return 0, fmt.Errorf("a stream ended with %q", finish)
	}
	return worst, nil
}
