// Package fakeengine is a scripted engine.Client for testing front ends
// without a model: it "loads" with progress events, answers each Generate
// with scripted text split into tokens at a fixed pace, honours Stop, and
// records every request so tests can check what the UI asked for.
package fakeengine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/profile"
)

// Reply is one scripted answer.
type Reply struct {
	Thinking string
	Content  string
}

// Options configure the fake. The zero value loads instantly and replies
// with an echo of the last user message.
type Options struct {
	// Replies are used in turn, the last one repeating. Empty: echo.
	Replies []Reply
	// TokenDelay is the pause before each token (and each load step).
	TokenDelay time.Duration
	// Info is what Loaded reports.
	Info engine.ModelInfo
	// Profile makes the fake send a ProfileSample before Done.
	Profile bool
	// FailBackend makes SwitchBackend to this name fail.
	FailBackend string
}

// DefaultInfo is the model the fake claims to run.
var DefaultInfo = engine.ModelInfo{
	Path: "testdata/fake.gguf", Name: "Fake-Bonsai", Arch: "qwen3", Variant: "Bonsai-1.7B (Q1_0 g128)",
	Params: 1_720_000_000, FileBytes: 248 << 20, WeightBytes: 231 << 20, ContextSize: 4096,
	KVAllocBytes: 448 << 20, Backend: "cpu", Adapter: "Fake CPU", Threads: 2, SIMD: "avx2",
}

// Engine is the fake. Create it with New.
type Engine struct {
	opts   Options
	events chan engine.Event

	mu       sync.Mutex
	info     engine.ModelInfo
	requests []engine.GenerateRequest
	switches []string
	resets   int
	stops    int
	cancel   chan struct{} // closed by Stop; nil when idle
	busy     sync.WaitGroup
	closed   bool
	quit     chan struct{} // closed by Close: stop pausing
}

// New starts the fake: it emits LoadProgress then Loaded.
func New(opts Options) *Engine {
	if opts.Info.Name == "" {
		opts.Info = DefaultInfo
	}
	e := &Engine{opts: opts, events: make(chan engine.Event, 1024), info: opts.Info, quit: make(chan struct{})}
	e.busy.Add(1)
	go func() {
		defer e.busy.Done()
		e.load(e.info.Backend)
	}()
	return e
}

func (e *Engine) load(backend string) {
	const steps = 4
	for i := int64(0); i <= steps; i++ {
		e.sleep()
		e.emit(engine.LoadProgress{Stage: "loading weights", Done: i, Total: steps})
	}
	e.mu.Lock()
	e.info.Backend = backend
	info := e.info
	e.mu.Unlock()
	e.emit(engine.Loaded{Info: info})
}

// sleep waits TokenDelay, or until Close.
func (e *Engine) sleep() {
	if e.opts.TokenDelay > 0 {
		select {
		case <-time.After(e.opts.TokenDelay):
		case <-e.quit:
		}
	}
}

// emit sends an event. Every sender runs under e.busy, and Close waits for
// them before closing the channel, so a send never meets a closed channel.
func (e *Engine) emit(ev engine.Event) { e.events <- ev }

// Events implements engine.Client.
func (e *Engine) Events() <-chan engine.Event { return e.events }

// Generate implements engine.Client: it streams the next scripted reply.
func (e *Engine) Generate(req engine.GenerateRequest) {
	e.mu.Lock()
	n := len(e.requests)
	e.requests = append(e.requests, req)
	cancel := make(chan struct{})
	e.cancel = cancel
	e.mu.Unlock()
	reply := e.reply(n, req)
	e.busy.Add(1)
	go func() {
		defer e.busy.Done()
		e.stream(req, reply, cancel)
	}()
}

func (e *Engine) reply(n int, req engine.GenerateRequest) Reply {
	if len(e.opts.Replies) > 0 {
		return e.opts.Replies[min(n, len(e.opts.Replies)-1)]
	}
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	r := Reply{Content: fmt.Sprintf("Reply %d to: %s", n+1, last)}
	if req.Think {
		r.Thinking = "The user wrote " + last + ". I should answer."
	}
	return r
}

func (e *Engine) stream(req engine.GenerateRequest, r Reply, cancel chan struct{}) {
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content)) + 4
	}
	start := time.Now()
	stats := engine.Stats{PrefillTokens: prompt, ContextSize: e.info.ContextSize, KVAllocBytes: e.info.KVAllocBytes}
	emitTokens := func(text string, thinking bool) bool {
		for _, tok := range Split(text) {
			select {
			case <-cancel:
				return false
			default:
			}
			e.sleep()
			if stats.DecodeTokens == 0 {
				stats.TTFT = time.Since(start) + time.Millisecond
				stats.PrefillTPS = float64(prompt) / stats.TTFT.Seconds()
			}
			stats.DecodeTokens++
			stats.ContextUsed = prompt + stats.DecodeTokens
			stats.KVUsedBytes = int64(stats.ContextUsed) * (stats.KVAllocBytes / int64(max(stats.ContextSize, 1)))
			stats.DecodeTPS = float64(stats.DecodeTokens) / (time.Since(start).Seconds() + 0.001)
			e.emit(engine.Token{ID: int32(stats.DecodeTokens), Text: tok, Thinking: thinking})
			e.emit(stats)
		}
		return true
	}
	reason := "stop"
	if !emitTokens(r.Thinking, true) || !emitTokens(r.Content, false) {
		reason = "stopped"
	}
	if e.opts.Profile {
		var s profile.Sample
		for p := profile.Phase(0); p < profile.NumPhases; p++ {
			s.Add(p, time.Duration(p+1)*time.Millisecond*time.Duration(max(stats.DecodeTokens, 1)))
		}
		s.Tokens = max(stats.DecodeTokens, 1)
		s.Source = "fake timers"
		e.emit(engine.ProfileSample{Sample: s})
	}
	e.mu.Lock()
	if e.cancel == cancel {
		e.cancel = nil
	}
	e.mu.Unlock()
	e.emit(engine.Done{Reason: reason, Stats: stats})
}

// Split cuts text into token-sized pieces: words with their leading space,
// and newlines on their own, like a BPE tokenizer's output looks.
func Split(text string) []string {
	var toks []string
	start := 0
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if i > start && (r == ' ' || r == '\n' || text[i-1] == '\n') {
			toks = append(toks, text[start:i])
			start = i
		}
		i += size
	}
	if start < len(text) {
		toks = append(toks, text[start:])
	}
	return toks
}

// Stop implements engine.Client.
func (e *Engine) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops++
	if e.cancel != nil {
		close(e.cancel)
		e.cancel = nil
	}
}

// SwitchBackend implements engine.Client: it reloads with progress, or fails
// for Options.FailBackend.
func (e *Engine) SwitchBackend(name string) {
	e.mu.Lock()
	e.switches = append(e.switches, name)
	e.mu.Unlock()
	e.busy.Add(1)
	go func() {
		defer e.busy.Done()
		if name == e.opts.FailBackend {
			e.emit(engine.Error{Err: fmt.Errorf("switch to %s: %w", name, ErrNoAdapter)})
			return
		}
		e.load(name)
	}()
}

// SwitchModel implements engine.Client: a path that does not exist fails
// (the old model stays); any other loads with progress as that model.
func (e *Engine) SwitchModel(path string) {
	e.busy.Add(1)
	go func() {
		defer e.busy.Done()
		if _, err := os.Stat(path); err != nil {
			e.emit(engine.Error{Err: fmt.Errorf("loading %s: %w", path, err)})
			return
		}
		e.mu.Lock()
		// Another file: another model, whose variant and context differ.
		e.info.Path, e.info.Name = path, filepath.Base(path)
		e.info.Variant, e.info.ContextSize, e.info.KVAllocBytes = "Qwen3 (other)", 1024, 12<<20
		backend := e.info.Backend
		e.mu.Unlock()
		e.load(backend)
	}()
}

// ErrNoAdapter is the failure SwitchBackend reports for Options.FailBackend.
var ErrNoAdapter = errors.New("no GPU adapter found")

// Reset implements engine.Client.
func (e *Engine) Reset() {
	e.mu.Lock()
	e.resets++
	e.mu.Unlock()
}

// Close implements engine.Client: it stops any reply and closes Events.
func (e *Engine) Close() {
	e.Stop()
	e.mu.Lock()
	if !e.closed {
		close(e.quit)
	}
	e.mu.Unlock()
	e.busy.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.events)
	}
}

// Requests returns the Generate requests received so far.
func (e *Engine) Requests() []engine.GenerateRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.GenerateRequest(nil), e.requests...)
}

// Switches returns the backends SwitchBackend was asked for.
func (e *Engine) Switches() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.switches...)
}

// Resets and Stops count those calls.
func (e *Engine) Resets() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resets
}

func (e *Engine) Stops() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stops
}
