// Package engine runs a model on its own goroutine. That goroutine is the only
// owner of the model and its KV cache; clients (the TUI, `bonsai run`, tests)
// send requests and receive events, so everything the TUI shows is also
// testable without a terminal.
//
// The files split by concern: engine.go is the request queue and the loop
// that serves it, load.go the model's lifecycle (open, load, switch),
// generate.go one reply, sampling.go the sampler's defaults.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // the engine runs models on the CPU at least
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// Options configure an engine.
type Options struct {
	// Path is the GGUF file to open; or File, already open (the engine does
	// not close a File it was given).
	Path string
	File *gguf.File
	// Open opens the files SwitchModel names (nil: gguf.Open); a caller
	// with a built-in model passes one that knows its name.
	Open func(path string) (*gguf.File, error)

	Backend string // "cpu", "gpu", "auto" ("" = auto)
	Adapter string // GPU adapter (infer.BackendOptions.Adapter); "" picks the best
	GPU     infer.GPUOptions
	Threads int
	Context int           // 0: infer.DefaultContext capped by the model
	KV      infer.KVTypes // the KV cache's types (infer.Options.KV)
	Batch   int           // 0: infer.DefaultBatch
	Profile bool
	// Snapshots is how many recurrent-state snapshots a recurrent model
	// keeps at turn boundaries (infer.Options.Snapshots; 0: the default).
	Snapshots int
	// Sampling used when a request brings none; nil: the model's
	// recommendation (DefaultSampling).
	Sampling *Sampling
	// ProfileEvery is how many decoding passes (a token each, unless
	// speculation verified drafts) separate ProfileSample events (default
	// 16); one also comes with every Done.
	ProfileEvery int
	// Spec is speculative decoding (infer/spec): the drafter, the draft
	// model's path and the longest draft. The zero value decodes plainly.
	Spec spec.Options
	// StateDir is where a session's model state is saved when its
	// conversation leaves the cache, and read back when it is resumed
	// (resume.go); "" saves none. StateBudget and StateFiles bound what it
	// holds (0: DefaultStateBudget bytes, DefaultStateFiles files).
	StateDir    string
	StateBudget int64
	StateFiles  int
}

// Engine is the real engine: one goroutine owns the model and its KV cache
// and serves requests in order. It implements Client.
//
// No method blocks: requests join an unbounded queue (a panel toggled a
// hundred times during a reply must not stall the UI), which the engine
// serves in order between replies. Stop and SetProfiling also act during a
// reply: Stop through a counter the reply checks before every token, and
// profiling through a flag the reply applies between tokens. Repeated
// requests that only the last of counts (a backend or model switch, Reset)
// are coalesced in the queue.
type Engine struct {
	opts     Options
	events   chan Event
	done     chan struct{}
	closing  sync.Once
	finished chan struct{}

	mu     sync.Mutex // guards queue, closed and cancel
	queue  []any      // requests not yet served, oldest first
	closed bool       // the loop has ended: requests are dropped
	wake   chan struct{}

	// Stop handling: Generate numbers requests; Stop marks every request
	// numbered so far as stopped, so a Stop that races ahead of its
	// Generate still counts, and cancels the reply in progress.
	generation atomic.Uint64
	stopped    atomic.Uint64
	profiling  atomic.Bool

	// Owned by the engine goroutine.
	cur         loaded       // the model in use
	window      window       // where the last prompt started (turns left out of a full context)
	backend     string       // the backend asked for by the last successful load
	profilingOn bool         // what the backend was last told (SetProfiling)
	spec        speculation  // the draft model, if Options.Spec has one
	sess        sessionState // the stored session the cache's conversation is

	// samplingTime is the sampler's time since the last ProfileSample, in
	// nanoseconds: added where a reply reads its tokens, taken where the
	// scheduler's hooks profile.
	samplingTime atomic.Int64
	// cancel ends the reply in progress (Stop); nil between replies.
	cancel context.CancelFunc

	// started is closed once the first load has got past its checks (it
	// reports the weights' progress) or has ended; startErr is then the
	// error it ended with before reporting any (Started).
	started   chan struct{}
	startOnce sync.Once
	startErr  error

	// vocab is the tokenizer and template of the model in use, for
	// CountTokens on the caller's goroutine (both are safe for concurrent
	// use); nil until a file is open.
	vocab atomic.Pointer[vocabulary]
}

// vocabulary turns messages into the model's tokens.
type vocabulary struct {
	tok  *tokenizer.Tokenizer
	tmpl *chat.Template
}

// ErrNoVocabulary: CountTokens was asked before the model file was read.
var ErrNoVocabulary = errors.New("the model's tokenizer is not loaded yet")

// CountTokens says how many tokens msgs take as a prompt of the model in
// use (its chat template and all), without touching the engine's work: a
// front end measures a file before attaching it, or a resumed chat before
// its first reply. It costs a tokenization of msgs.
func (e *Engine) CountTokens(msgs []chat.Message, think bool) (int, error) {
	v := e.vocab.Load()
	if v == nil {
		return 0, ErrNoVocabulary
	}
	n := len(v.tmpl.Encode(msgs, true, think, v.tok.Encode))
	if v.tok.AddBOS() && v.tok.BOS() >= 0 {
		n++
	}
	return n, nil
}

type generateRequest struct {
	req GenerateRequest
	id  uint64
}
type switchRequest struct{ name string }
type switchModelRequest struct{ path string }
type resetRequest struct{}

// New starts an engine. Loading happens on the engine goroutine: watch
// Events for LoadProgress, then Loaded, or a fatal Error.
func New(opts Options) *Engine {
	if opts.ProfileEvery <= 0 {
		opts.ProfileEvery = 16
	}
	e := &Engine{
		opts:     opts,
		events:   make(chan Event, 256),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		started:  make(chan struct{}),
	}
	e.profiling.Store(opts.Profile)
	go e.run()
	return e
}

func (e *Engine) Events() <-chan Event { return e.events }

// Started waits until the first load has got past its checks (the
// backend is up and the weights are being read) or has failed, and
// returns the error it failed with before that. A front end that takes
// over the terminal calls it first, so that settings that cannot start
// (a context the machine cannot hold, a GPU there is not) are refused
// with their reason, not shown as a chat without a model. Events are
// kept for the front end: Started reads none.
func (e *Engine) Started() error {
	<-e.started
	return e.startErr
}

// markStarted ends Started's wait, with err if the first load failed
// before reporting progress; only the first call counts.
func (e *Engine) markStarted(err error) {
	e.startOnce.Do(func() {
		e.startErr = err
		close(e.started)
	})
}

func (e *Engine) Generate(req GenerateRequest) {
	e.send(generateRequest{req: req, id: e.generation.Add(1)})
}

func (e *Engine) Stop() {
	e.stopped.Store(e.generation.Load())
	e.mu.Lock()
	if e.cancel != nil {
		e.cancel()
	}
	e.mu.Unlock()
}

func (e *Engine) SwitchBackend(name string) { e.send(switchRequest{name}) }

func (e *Engine) SwitchModel(path string) { e.send(switchModelRequest{path}) }

func (e *Engine) Reset() { e.send(resetRequest{}) }

// SetProfiling turns per-phase timing on or off (the profiling panel). It
// takes effect before the next token, during a reply too; toggles faster
// than tokens count only by their last state.
func (e *Engine) SetProfiling(on bool) {
	e.profiling.Store(on)
	e.poke()
}

// Close stops the engine, waits for its goroutine, releases the model and
// closes Events.
func (e *Engine) Close() {
	e.closing.Do(func() {
		e.Stop()
		close(e.done)
	})
	<-e.finished
}

// send queues a request without blocking; it is dropped once the engine
// has stopped (closed, or failed to load: the fatal Error said so). A
// switch or Reset right behind one of its kind replaces it: only the last
// would matter.
func (e *Engine) send(r any) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	if n := len(e.queue); n > 0 && coalesces(e.queue[n-1], r) {
		e.queue[n-1] = r
	} else {
		e.queue = append(e.queue, r)
	}
	e.mu.Unlock()
	e.poke()
}

func coalesces(prev, next any) bool {
	switch prev.(type) {
	case switchRequest:
		_, ok := next.(switchRequest)
		return ok
	case switchModelRequest:
		_, ok := next.(switchModelRequest)
		return ok
	case resetRequest:
		_, ok := next.(resetRequest)
		return ok
	}
	return false
}

// poke wakes the engine goroutine if it waits.
func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest queued request.
func (e *Engine) next() (any, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) == 0 {
		return nil, false
	}
	r := e.queue[0]
	e.queue[0] = nil
	e.queue = e.queue[1:]
	return r, true
}

// emit delivers an event unless the engine is closing.
func (e *Engine) emit(ev Event) bool {
	select {
	case e.events <- ev:
		return true
	case <-e.done:
		return false
	}
}

// ErrCrashed reports a bug caught inside the engine goroutine: the engine
// has stopped, but the front end keeps running (and a terminal UI can restore
// the terminal and say what happened instead of dying in raw mode).
var ErrCrashed = errors.New("engine crashed")

// ErrNoModel: a reply was asked for while no model is loaded (the first
// load failed and no switch has succeeded since).
var ErrNoModel = errors.New("no model is loaded: switch to another backend or model")

func (e *Engine) run() {
	defer close(e.finished)
	defer close(e.events)
	defer e.release()
	defer func() {
		e.mu.Lock()
		e.closed, e.queue = true, nil
		e.mu.Unlock()
	}()
	defer func() {
		if r := recover(); r != nil {
			slog.Error("engine panic", "panic", r, "stack", string(debug.Stack()))
			e.emit(Error{Err: fmt.Errorf("%w: %v", ErrCrashed, r), Fatal: true})
		}
	}()
	defer e.markStarted(errors.New("the engine stopped while loading"))
	if err := e.open(); err != nil {
		e.markStarted(err)
		e.emit(Error{Err: err, Fatal: true})
		return
	}
	if err := e.load(e.opts.Backend); err != nil {
		// The file is open: a switch to another backend or model may
		// still work, so the engine keeps serving, without a model.
		e.markStarted(err)
		e.emit(Error{Err: err, NoModel: true})
	} else if err := e.openDraft(); err != nil {
		e.markStarted(err)
		e.emit(Error{Err: err, Fatal: true})
		return
	}
	e.markStarted(nil)
	e.loop()
	// A session bound (or deleted) just before Close still counts.
	for r, ok := e.next(); ok; r, ok = e.next() {
		switch r := r.(type) {
		case bindRequest:
			e.bind(r.id)
		case forgetRequest:
			e.forget(r.id)
		}
	}
	e.persist()
}

// loop serves requests until Close.
func (e *Engine) loop() {
	for {
		select {
		case <-e.done:
			return
		case <-e.wake:
		}
		e.applyProfiling()
		for {
			select {
			case <-e.done:
				return
			default:
			}
			r, ok := e.next()
			if !ok {
				break
			}
			e.serve(r)
		}
	}
}

func (e *Engine) serve(r any) {
	switch r := r.(type) {
	case generateRequest:
		if e.cur.model == nil {
			e.emit(Error{Err: ErrNoModel, NoModel: true})
			return
		}
		e.generate(r)
	case switchRequest:
		had := e.cur.model != nil
		if err := e.load(r.name); err != nil {
			e.emit(Error{Err: fmt.Errorf("switching to %s: %w", r.name, err), NoModel: !had})
		} else if !had {
			e.startDraft()
		}
	case switchModelRequest:
		had := e.cur.model != nil
		if err := e.switchModel(r.path); err != nil {
			e.emit(Error{Err: fmt.Errorf("loading %s: %w", filepath.Base(r.path), err), NoModel: !had})
		} else if !had {
			e.startDraft()
		}
	case bindRequest:
		e.bind(r.id)
	case forgetRequest:
		e.forget(r.id)
	case resetRequest:
		e.persist()
		e.sess = sessionState{}
		e.forgetCache()
		e.window = window{}
		if e.spec.drafter != nil {
			e.spec.drafter.Sequence().Reset()
		}
	}
}

// startDraft opens the draft model once a first model has loaded after
// the first load failed; a draft that cannot load leaves plain decoding.
func (e *Engine) startDraft() {
	if e.spec.model != nil {
		return
	}
	if err := e.openDraft(); err != nil {
		e.emit(Error{Err: err})
	}
}

// applyProfiling tells the backend what SetProfiling last asked, if that
// changed.
func (e *Engine) applyProfiling() { e.applyProfilingTo(e.profiling.Load()) }

// applyProfilingTo turns the backend's profiling on or off, as asked
// (applyProfiling reads what was asked last).
func (e *Engine) applyProfilingTo(on bool) {
	if on == e.profilingOn || e.cur.model == nil {
		return
	}
	e.cur.model.Backend().SetProfiling(on)
	e.profilingOn = on
	e.samplingTime.Store(0)
}

var _ Client = (*Engine)(nil)
