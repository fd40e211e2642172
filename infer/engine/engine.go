package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // the engine runs models on the CPU at least
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// Options configure an engine.
type Options struct {
	// Path is the GGUF file to open; or File, already open (the engine does
	// not close a File it was given).
	Path string
	File *gguf.File

	Backend string // "cpu", "gpu", "auto" ("" = auto)
	Adapter string // GPU adapter (infer.BackendOptions.Adapter); "" picks the best
	Threads int
	Context int // 0: infer.DefaultContext capped by the model
	Batch   int // 0: infer.DefaultBatch
	Profile bool
	// Sampling used when a request brings none; nil: the model's
	// recommendation (PrismML's for Bonsai, llama.cpp's defaults otherwise).
	Sampling *Sampling
	// ProfileEvery is how many decoded tokens separate ProfileSample events
	// (default 16); one also comes with every Done.
	ProfileEvery int
}

// Engine is the real engine: one goroutine owns the model and its KV cache
// and serves requests in order. It implements Client.
type Engine struct {
	opts     Options
	events   chan Event
	requests chan any
	done     chan struct{}
	closing  sync.Once
	finished chan struct{}

	// Stop handling: Generate numbers requests; Stop marks every request
	// numbered so far as stopped, so a Stop that races ahead of its
	// Generate still counts.
	generation atomic.Uint64
	stopped    atomic.Uint64
	profiling  atomic.Bool

	// Owned by the engine goroutine.
	file         *gguf.File
	ownsFile     bool
	model        *infer.Model
	seq          *infer.Sequence
	tok          *tokenizer.Tokenizer
	tmpl         *chat.Template
	stopIDs      map[int32]bool
	info         ModelInfo
	window       window        // where the last prompt started (turns left out of a full context)
	backend      string        // the backend asked for by the last successful load
	samplingTime time.Duration // sampler time since the last ProfileSample
}

// loaded is what the engine holds for one model file, kept aside while
// SwitchModel tries another so that a failure can put it back.
type loaded struct {
	file     *gguf.File
	ownsFile bool
	model    *infer.Model
	seq      *infer.Sequence
	tok      *tokenizer.Tokenizer
	tmpl     *chat.Template
	stopIDs  map[int32]bool
	info     ModelInfo
}

type generateRequest struct {
	req GenerateRequest
	id  uint64
}
type switchRequest struct{ name string }
type switchModelRequest struct{ path string }
type resetRequest struct{}
type profileRequest struct{ on bool }

// New starts an engine. Loading happens on the engine goroutine: watch
// Events for LoadProgress, then Loaded, or a fatal Error.
func New(opts Options) *Engine {
	if opts.ProfileEvery <= 0 {
		opts.ProfileEvery = 16
	}
	e := &Engine{
		opts:     opts,
		events:   make(chan Event, 256),
		requests: make(chan any, 16),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}
	e.profiling.Store(opts.Profile)
	go e.run()
	return e
}

func (e *Engine) Events() <-chan Event { return e.events }

func (e *Engine) Generate(req GenerateRequest) {
	e.send(generateRequest{req: req, id: e.generation.Add(1)})
}

func (e *Engine) Stop() { e.stopped.Store(e.generation.Load()) }

func (e *Engine) SwitchBackend(name string) { e.send(switchRequest{name}) }

func (e *Engine) SwitchModel(path string) { e.send(switchModelRequest{path}) }

func (e *Engine) Reset() { e.send(resetRequest{}) }

// SetProfiling turns per-phase timing on or off (the profiling panel).
func (e *Engine) SetProfiling(on bool) {
	e.profiling.Store(on)
	e.send(profileRequest{on})
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

// send queues a request; it is dropped once the engine has stopped (closed,
// or failed to load: the fatal Error said so).
func (e *Engine) send(r any) {
	select {
	case e.requests <- r:
	case <-e.done:
	case <-e.finished:
	}
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

func (e *Engine) run() {
	defer close(e.finished)
	defer close(e.events)
	defer e.release()
	defer func() {
		if r := recover(); r != nil {
			slog.Error("engine panic", "panic", r, "stack", string(debug.Stack()))
			e.emit(Error{Err: fmt.Errorf("%w: %v", ErrCrashed, r), Fatal: true})
		}
	}()
	if err := e.open(); err != nil {
		e.emit(Error{Err: err, Fatal: true})
		return
	}
	if err := e.load(e.opts.Backend); err != nil {
		e.emit(Error{Err: err, Fatal: true})
		return
	}
	for {
		select {
		case <-e.done:
			return
		case r := <-e.requests:
			switch r := r.(type) {
			case generateRequest:
				e.generate(r)
			case switchRequest:
				if err := e.load(r.name); err != nil {
					e.emit(Error{Err: fmt.Errorf("switching to %s: %w", r.name, err)})
				}
			case switchModelRequest:
				if err := e.switchModel(r.path); err != nil {
					e.emit(Error{Err: fmt.Errorf("loading %s: %w", filepath.Base(r.path), err)})
				}
			case resetRequest:
				e.seq.Reset()
				e.window = window{}
			case profileRequest:
				if e.model != nil {
					e.model.Backend().SetProfiling(r.on)
				}
			}
		}
	}
}

func (e *Engine) open() error {
	if e.opts.File != nil {
		e.file = e.opts.File
	} else {
		if e.opts.Path == "" {
			return errors.New("engine: no model file given")
		}
		e.emit(LoadProgress{Stage: "mapping " + filepath.Base(e.opts.Path)})
		f, err := gguf.Open(e.opts.Path)
		if err != nil {
			return err
		}
		e.file, e.ownsFile = f, true
	}
	return e.bindVocab()
}

// bindVocab reads e.file's tokenizer and chat template.
func (e *Engine) bindVocab() error {
	tok, err := tokenizer.FromGGUF(e.file.KV)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	e.tok = tok
	e.tmpl = chat.FromGGUF(e.file.KV)
	e.stopIDs = map[int32]bool{}
	for _, id := range e.tmpl.StopIDs(tok.ID) {
		e.stopIDs[id] = true
	}
	return nil
}

// load builds the model on a backend. On failure the previous model, if
// any, stays.
func (e *Engine) load(backend string) error {
	stage := "loading weights on " + orAuto(backend)
	m, err := infer.Load(e.file, infer.Options{
		Backend: backend, Adapter: e.opts.Adapter, Threads: e.opts.Threads, Context: e.opts.Context, Batch: e.opts.Batch,
		Profile: e.profiling.Load(),
		Progress: func(done, total int64) {
			e.emit(LoadProgress{Stage: stage, Done: done, Total: total})
		},
	})
	if err != nil {
		return err
	}
	if e.model != nil {
		e.model.Close()
	}
	e.model, e.backend = m, backend
	if e.seq == nil {
		e.seq = infer.NewSequence(m)
	} else {
		e.seq.SetModel(m)
	}
	e.info = e.modelInfo()
	e.emit(Loaded{Info: e.info})
	return nil
}

// switchModel replaces the model with the file at path, on the backend in
// use; the conversation's KV cache starts afresh. On any failure the old
// model stays, loaded and usable.
func (e *Engine) switchModel(path string) error {
	e.emit(LoadProgress{Stage: "mapping " + filepath.Base(path)})
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	old := loaded{e.file, e.ownsFile, e.model, e.seq, e.tok, e.tmpl, e.stopIDs, e.info}
	e.file, e.ownsFile, e.model, e.seq = f, true, nil, nil
	err = e.bindVocab()
	if err == nil {
		err = e.load(e.backend)
	}
	if err != nil {
		f.Close()
		e.file, e.ownsFile, e.model, e.seq, e.tok, e.tmpl, e.stopIDs, e.info =
			old.file, old.ownsFile, old.model, old.seq, old.tok, old.tmpl, old.stopIDs, old.info
		return err
	}
	old.model.Close()
	if old.ownsFile {
		old.file.Close()
	}
	return nil
}

func orAuto(s string) string {
	if s == "" {
		return "auto"
	}
	return s
}

func (e *Engine) modelInfo() ModelInfo {
	m, f := e.model, e.file
	bi := m.Backend().Info()
	name, _ := f.KV.String("general.name")
	if name == "" {
		name = filepath.Base(f.Path)
	}
	mem := m.Memory(0)
	details := bi.Details
	if m.Fallback != nil {
		details = append([]string{"auto: on the CPU, as the GPU backend declined: " + m.Fallback.Error()}, details...)
	}
	return ModelInfo{
		Path: f.Path, Name: name, Arch: m.Hparams.Arch, Variant: m.Variant.Name,
		Params: infer.Params(f), FileBytes: mem.FileBytes, WeightBytes: mem.WeightBytes,
		ContextSize: m.Context(), KVAllocBytes: mem.KVAlloc,
		Backend: bi.Name, Adapter: bi.Adapter, Threads: bi.Threads, SIMD: bi.SIMD, Details: details,
	}
}

func (e *Engine) release() {
	if e.model != nil {
		e.model.Close()
		e.model = nil
	}
	if e.ownsFile && e.file != nil {
		e.file.Close()
	}
}

// sampling picks the request's parameters, else the engine's, else the
// model's recommendation.
func (e *Engine) sampling(req *Sampling) sample.Params {
	s := req
	if s == nil {
		s = e.opts.Sampling
	}
	if s == nil {
		v := e.model.Variant
		if v.Bonsai {
			return sample.Params{Temperature: v.Temperature, TopK: v.TopK, TopP: v.TopP, RepeatPenalty: 1, RepeatLastN: 64,
				Seed: uint64(time.Now().UnixNano())}
		}
		return sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64,
			Seed: uint64(time.Now().UnixNano())}
	}
	p := sample.Params{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP,
		RepeatPenalty: s.RepeatPenalty, RepeatLastN: s.RepeatLastN, Seed: s.Seed}
	if p.RepeatLastN == 0 && p.RepeatPenalty != 0 && p.RepeatPenalty != 1 {
		p.RepeatLastN = 64
	}
	return p
}

// generate answers one request: render, prefill what the cache lacks,
// then sample and stream until the end of the turn, the limit, the end of
// the context or Stop.
func (e *Engine) generate(r generateRequest) {
	stopped := func() bool { return e.stopped.Load() >= r.id }
	m := e.model
	start := time.Now()
	stats := Stats{ContextSize: m.Context(), KVAllocBytes: m.KVSpec().Bytes()}
	kvPerToken := infer.KVBytesPerToken(m.Hparams)
	finish := func(reason string) {
		stats.ContextUsed = e.seq.Len()
		stats.KVUsedBytes = kvPerToken * int64(e.seq.Len())
		if e.profiling.Load() {
			e.emit(e.profileSample(m))
		}
		e.emit(Done{Reason: reason, Stats: stats})
	}
	if stopped() {
		finish("stopped")
		return
	}
	sampler, err := sample.New(e.sampling(r.req.Sampling))
	if err != nil {
		e.emit(Error{Err: err})
		return
	}
	var prompt string
	ids, dropped, err := e.window.fit(r.req.Messages, m.Context(), replyReserve(m.Context(), r.req.MaxTokens),
		func(msgs []chat.Message) []int32 {
			prompt = e.tmpl.Render(msgs, true, r.req.Think)
			ids := e.tok.Encode(prompt, true)
			if e.tok.AddBOS() && e.tok.BOS() >= 0 {
				ids = append([]int32{e.tok.BOS()}, ids...)
			}
			return ids
		})
	if err != nil {
		e.emit(Error{Err: err})
		finish("length")
		return
	}
	if dropped > 0 {
		e.emit(ContextTrimmed{Dropped: dropped, Tokens: len(ids), Context: m.Context()})
	}
	for _, id := range ids {
		sampler.Accept(id)
	}
	if e.profiling.Load() {
		e.profileSample(m) // start the next sample at this request
	}
	reused, err := e.seq.Prefill(ids, func(done, total int) bool {
		if total >= 64 {
			e.emit(PrefillProgress{Done: done, Total: total})
		}
		return !stopped()
	})
	if errors.Is(err, infer.ErrInterrupted) {
		finish("stopped")
		return
	}
	if err != nil {
		e.emit(Error{Err: err})
		e.seq.Reset()
		return
	}
	stats.PrefillTokens = len(ids) - reused
	stats.PrefillTPS = rate(stats.PrefillTokens, time.Since(start))

	dec := e.tok.NewStreamDecoder()
	think := chat.NewThinkParser(strings.HasSuffix(strings.TrimRight(prompt, "\n"), chat.ThinkOpen))
	decodeStart := time.Now()
	emitText := func(id int32, segs []chat.Segment) bool {
		for _, s := range segs {
			if s.Text != "" && !e.emit(Token{ID: id, Text: s.Text, Thinking: s.Thinking}) {
				return false
			}
		}
		return true
	}
	for {
		if stopped() {
			emitText(-1, think.Feed(dec.Flush()))
			emitText(-1, think.Flush())
			finish("stopped")
			return
		}
		t0 := time.Now()
		id := sampler.Sample(m.Logits())
		sampler.Accept(id)
		e.samplingTime += time.Since(t0)
		if stats.DecodeTokens == 0 {
			stats.TTFT = time.Since(start)
		}
		stats.DecodeTokens++
		if e.tok.IsEOG(id) || e.stopIDs[id] {
			emitText(id, think.Feed(dec.Flush()))
			emitText(id, think.Flush())
			finish("stop")
			return
		}
		if !emitText(id, think.Feed(dec.Next(id))) {
			return
		}
		full := e.seq.Len() >= m.Context()
		if full || (r.req.MaxTokens > 0 && stats.DecodeTokens >= r.req.MaxTokens) {
			emitText(id, think.Feed(dec.Flush()))
			emitText(id, think.Flush())
			finish("length")
			return
		}
		if err := e.seq.Append(id); err != nil {
			e.emit(Error{Err: err})
			finish("length")
			return
		}
		stats.DecodeTPS = rate(stats.DecodeTokens, time.Since(decodeStart))
		stats.ContextUsed = e.seq.Len()
		stats.KVUsedBytes = kvPerToken * int64(e.seq.Len())
		e.emit(stats)
		if e.profiling.Load() && stats.DecodeTokens%e.opts.ProfileEvery == 0 {
			e.emit(e.profileSample(m))
		}
	}
}

// profileSample takes the backend's phase times, adds the sampler's and
// starts over.
func (e *Engine) profileSample(m *infer.Model) ProfileSample {
	s := m.Backend().TakeProfile()
	s.Add(profile.Sampling, e.samplingTime)
	e.samplingTime = 0
	return ProfileSample{Sample: s}
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

var _ Client = (*Engine)(nil)
