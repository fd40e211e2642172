package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

// testFile is a 2-layer Q1_0 model with the real Qwen3 tokenizer.
func testFile(t *testing.T) *gguf.File {
	t.Helper()
	cfg := tinymodel.Config{Layers: 2, Embed: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 256,
		Context: 1024, Type: gguf.Q1_0, Tied: true, Seed: 3, RopeBase: 1e6}
	cfg, err := tinymodel.WithQwenTokenizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func start(t *testing.T, f *gguf.File, opts Options) *Engine {
	t.Helper()
	opts.File, opts.Backend, opts.Threads = f, "cpu", 2
	if opts.Context == 0 {
		opts.Context = 256
	}
	e := New(opts)
	t.Cleanup(e.Close)
	for ev := range waitFor[Loaded](t, e) {
		_ = ev
	}
	return e
}

// waitFor collects events until one of type T (returned last), failing on
// a fatal error or a timeout.
func waitFor[T Event](t *testing.T, e *Engine) []Event {
	t.Helper()
	var got []Event
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-e.Events():
			if !ok {
				t.Fatalf("events closed while waiting; got %v", got)
			}
			got = append(got, ev)
			if err, isErr := ev.(Error); isErr && err.Fatal {
				t.Fatalf("fatal engine error: %v", err.Err)
			}
			if _, done := ev.(T); done {
				return got
			}
		case <-timeout:
			t.Fatalf("timed out; got %v", got)
		}
	}
}

type reply struct {
	ids    []int32
	text   string
	done   Done
	errors []error
	stats  int
	live   Stats // the last Stats event before Done
}

func collect(t *testing.T, e *Engine) reply {
	t.Helper()
	var r reply
	for _, ev := range waitFor[Done](t, e) {
		switch ev := ev.(type) {
		case Token:
			r.ids = append(r.ids, ev.ID)
			r.text += ev.Text
		case Stats:
			r.stats++
			r.live = ev
		case Error:
			r.errors = append(r.errors, ev.Err)
		case Done:
			r.done = ev
		}
	}
	return r
}

var greedy = &Sampling{}

func ask(text string) []chat.Message {
	return []chat.Message{{Role: chat.RoleUser, Content: text}}
}

// The engine's greedy reply must be what the model itself decodes.
func TestGreedyReplyMatchesModel(t *testing.T) {
	f := testFile(t)
	e := start(t, f, Options{})
	e.Generate(GenerateRequest{Messages: ask("Hello"), MaxTokens: 6, Sampling: greedy})
	r := collect(t, e)
	if r.done.Reason != "length" || r.done.Stats.DecodeTokens != 6 {
		t.Fatalf("Done = %+v, want length after 6 tokens", r.done)
	}

	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := tok.Encode(chat.FromGGUF(f.KV).Render(ask("Hello"), true, false), true)
	if err := m.Forward(ids, 0); err != nil {
		t.Fatal(err)
	}
	var want []int32
	dec := tok.NewStreamDecoder()
	var text string
	for i := range 6 {
		id := sample.Greedy(m.Logits())
		want = append(want, id)
		text += dec.Next(id)
		if err := m.Forward([]int32{id}, len(ids)+i); err != nil {
			t.Fatal(err)
		}
	}
	text += dec.Flush()
	// The engine streams the model's text through the think parser.
	parser := chat.NewThinkParser(false)
	var parsed string
	for _, seg := range append(parser.Feed(text), parser.Flush()...) {
		parsed += seg.Text
	}
	if parsed == "" {
		t.Fatalf("the test model's greedy reply %q is empty after parsing: pick another seed", text)
	}
	if parsed != r.text {
		t.Errorf("engine text %q, model text %q", r.text, parsed)
	}
	if r.stats == 0 {
		t.Error("no Stats events during decoding")
	}
	if r.done.Stats.PrefillTokens != len(ids) || r.done.Stats.ContextSize != 256 || r.done.Stats.KVAllocBytes == 0 {
		t.Errorf("stats %+v: want %d prefill tokens, context 256, KV bytes", r.done.Stats, len(ids))
	}
	for _, id := range r.ids {
		found := false
		for _, w := range want {
			found = found || w == id
		}
		if !found {
			t.Errorf("engine streamed token %d the model did not produce (%v)", id, want)
		}
	}
}

func TestKVPrefixReuse(t *testing.T) {
	e := start(t, testFile(t), Options{})
	msgs := ask("Tell me about trees")
	e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 4, Sampling: greedy})
	first := collect(t, e)

	// The same conversation again: only the last prompt token runs.
	e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 4, Sampling: greedy})
	again := collect(t, e)
	if again.done.Stats.PrefillTokens != 1 {
		t.Errorf("repeated prompt prefilled %d tokens, want 1", again.done.Stats.PrefillTokens)
	}
	if again.text != first.text {
		t.Errorf("repeated greedy reply %q differs from %q", again.text, first.text)
	}

	// A follow-up only prefills what follows the shared prefix.
	follow := append(msgs, chat.Message{Role: chat.RoleAssistant, Content: first.text},
		chat.Message{Role: chat.RoleUser, Content: "And rocks?"})
	e.Generate(GenerateRequest{Messages: follow, MaxTokens: 2, Sampling: greedy})
	next := collect(t, e)
	full := first.done.Stats.PrefillTokens
	if p := next.done.Stats.PrefillTokens; p == 0 || p >= full+10 {
		t.Errorf("follow-up prefilled %d tokens; the first prompt alone was %d", p, full)
	}

	// Reset forgets the cache.
	e.Reset()
	e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 1, Sampling: greedy})
	if r := collect(t, e); r.done.Stats.PrefillTokens != full {
		t.Errorf("after Reset prefilled %d tokens, want %d", r.done.Stats.PrefillTokens, full)
	}
}

func TestStop(t *testing.T) {
	e := start(t, testFile(t), Options{Context: 1024})
	e.Generate(GenerateRequest{Messages: ask("Go on forever"), Sampling: &Sampling{Temperature: 1, Seed: 1}})
	// Stop after the first streamed token.
	waitFor[Token](t, e)
	e.Stop()
	r := collect(t, e)
	if r.done.Reason != "stopped" && r.done.Reason != "stop" {
		t.Fatalf("Done reason %q, want stopped", r.done.Reason)
	}
	// The engine serves the next request normally.
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	if r := collect(t, e); r.done.Reason != "length" {
		t.Fatalf("after Stop, Done = %+v", r.done)
	}
}

func TestContextFull(t *testing.T) {
	e := start(t, testFile(t), Options{Context: 24})
	e.Generate(GenerateRequest{Messages: ask("Hi"), Sampling: greedy})
	r := collect(t, e)
	if r.done.Reason != "length" && r.done.Reason != "stop" {
		t.Fatalf("Done = %+v, want length at the context's end", r.done)
	}
	if r.done.Reason == "length" && r.done.Stats.ContextUsed != 24 {
		t.Errorf("context used %d of 24 when full", r.done.Stats.ContextUsed)
	}
	e.Generate(GenerateRequest{Messages: ask(strings.Repeat("long prompt ", 20)), Sampling: greedy})
	r = collect(t, e)
	if len(r.errors) == 0 || !errors.Is(r.errors[0], infer.ErrContextFull) {
		t.Errorf("over-long prompt: errors %v, want ErrContextFull", r.errors)
	}
}

func TestSwitchBackend(t *testing.T) {
	e := start(t, testFile(t), Options{})
	e.SwitchBackend("no-such-backend")
	evs := waitFor[Error](t, e)
	if err := evs[len(evs)-1].(Error); err.Fatal || !errors.Is(err.Err, infer.ErrUnknownBackend) {
		t.Fatalf("switch to unknown backend: %+v", err)
	}
	e.SwitchBackend("cpu")
	evs = waitFor[Loaded](t, e)
	if info := evs[len(evs)-1].(Loaded).Info; info.Backend != "cpu" || info.ContextSize != 256 || info.Arch != "qwen3" {
		t.Fatalf("Loaded info %+v", info)
	}
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	if r := collect(t, e); r.done.Reason != "length" {
		t.Fatalf("after switching, Done = %+v", r.done)
	}
}

func TestProfiling(t *testing.T) {
	e := start(t, testFile(t), Options{Profile: true, ProfileEvery: 2})
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 4, Sampling: greedy})
	var samples []ProfileSample
	for _, ev := range waitFor[Done](t, e) {
		if s, ok := ev.(ProfileSample); ok {
			samples = append(samples, s)
		}
	}
	if len(samples) < 2 || !samples[0].Prompt || samples[0].Sample.Tokens == 0 {
		t.Fatalf("samples %+v: want the prompt's first, then the decoding steps'", samples)
	}
	for _, s := range samples[1:] {
		if s.Prompt {
			t.Errorf("a decoding sample is marked as the prompt's: %+v", s)
		}
	}
	s := samples[1].Sample
	if s.Tokens == 0 || s.Total() <= 0 || s.Source != "cpu timers" {
		t.Errorf("profile sample %+v", s)
	}
	for _, p := range []profile.Phase{profile.Embed, profile.QKV, profile.Attention, profile.FFN, profile.OutputHead, profile.Sampling} {
		if s.Phases[p] <= 0 {
			t.Errorf("phase %s has no time in %+v", p, s)
		}
	}
}

// Close during a reply returns, closes Events (after what was already
// queued), and leaves later calls returning at once.
func TestCloseEndsEvents(t *testing.T) {
	e := start(t, testFile(t), Options{})
	e.Generate(GenerateRequest{Messages: ask("Hi"), Sampling: &Sampling{Temperature: 1}})
	within := func(what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not return", what)
		}
	}
	within("Close during a reply", e.Close)
	within("draining Events", func() {
		for range e.Events() {
		}
	})
	within("Generate after Close", func() { e.Generate(GenerateRequest{Messages: ask("again")}) })
	within("Reset after Close", e.Reset)
}

func TestMissingFileIsFatal(t *testing.T) {
	e := New(Options{Path: "/nonexistent/model.gguf"})
	defer e.Close()
	ev := <-e.Events()
	for {
		if _, ok := ev.(LoadProgress); !ok {
			break
		}
		ev = <-e.Events()
	}
	if err, ok := ev.(Error); !ok || !err.Fatal {
		t.Fatalf("got %#v, want a fatal Error", ev)
	}
	// Requests to a dead engine return instead of blocking.
	for range 40 {
		e.Generate(GenerateRequest{Messages: ask("hi")})
	}
	e.SwitchBackend("cpu")
	e.Reset()
}

// TestPanicBecomesFatalError: a bug that panics on the engine goroutine must
// reach the front end as a fatal Error (so a terminal UI can restore the
// terminal and say so), and Events must then close, never hang or kill the
// process.
func TestPanicBecomesFatalError(t *testing.T) {
	infer.RegisterBackend("test-panics", func(infer.BackendOptions) (infer.Backend, error) {
		panic("backend exploded")
	})
	e := New(Options{File: testFile(t), Backend: "test-panics"})
	defer e.Close()
	timeout := time.After(60 * time.Second)
	var fatal error
	for {
		select {
		case ev, ok := <-e.Events():
			if !ok {
				if !errors.Is(fatal, ErrCrashed) || !strings.Contains(fatal.Error(), "backend exploded") {
					t.Fatalf("events closed; fatal error %v, want ErrCrashed with the panic value", fatal)
				}
				return
			}
			if er, isErr := ev.(Error); isErr && er.Fatal {
				fatal = er.Err
			}
		case <-timeout:
			t.Fatal("no fatal error and no close after a panic")
		}
	}
}

// TestSwitchModel: /model loads another file on the same backend; a bad
// file is reported and leaves the old model working.
func TestSwitchModel(t *testing.T) {
	e := start(t, testFile(t), Options{})
	bad := filepath.Join(t.TempDir(), "truncated.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.SwitchModel(bad)
	evs := waitFor[Error](t, e)
	if err := evs[len(evs)-1].(Error); err.Fatal || !errors.Is(err.Err, gguf.ErrNotGGUF) {
		t.Fatalf("switch to a truncated file: %+v", err)
	}
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	if r := collect(t, e); r.done.Reason != "length" {
		t.Fatalf("old model after a failed switch: Done = %+v", r.done)
	}

	cfg := tinymodel.Config{Layers: 1, Embed: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 256,
		Context: 1024, Type: gguf.Q8_0, Tied: true, Seed: 9, RopeBase: 1e6}
	cfg, err := tinymodel.WithQwenTokenizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data, err := tinymodel.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(t.TempDir(), "next.gguf")
	if err := os.WriteFile(next, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e.SwitchModel(next)
	evs = waitFor[Loaded](t, e)
	if info := evs[len(evs)-1].(Loaded).Info; info.Path != next || info.Backend != "cpu" {
		t.Fatalf("Loaded after switch: %+v", info)
	}
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	if r := collect(t, e); r.done.Reason != "length" || r.done.Stats.PrefillTokens == 0 {
		t.Fatalf("new model: Done = %+v", r.done)
	}
}

// TestControlRequestsNeverBlock: the TUI calls the engine from its Update,
// which must never block. A hundred panel toggles and twenty backend
// switches during a reply each return at once, the toggles take effect
// during the reply, Stop still ends it promptly, and the switches are
// served after it, as one.
func TestControlRequestsNeverBlock(t *testing.T) {
	e := start(t, testFile(t), Options{Context: 1024, ProfileEvery: 2})
	e.Generate(GenerateRequest{Messages: ask("Go on forever"), Sampling: &Sampling{Temperature: 1, Seed: 1}})
	waitFor[Token](t, e)
	var slowest time.Duration
	for i := range 100 {
		t0 := time.Now()
		e.SetProfiling(i%2 == 1) // ends on
		slowest = max(slowest, time.Since(t0))
	}
	for range 20 {
		t0 := time.Now()
		e.SwitchBackend("cpu")
		slowest = max(slowest, time.Since(t0))
	}
	if slowest > 20*time.Millisecond {
		t.Errorf("a request during a reply took %v to return", slowest)
	}
	stopAt := time.Now()
	e.Stop()
	evs := waitFor[Done](t, e)
	if d := time.Since(stopAt); d > 2*time.Second {
		t.Errorf("Stop took %v to end the reply", d)
	}
	if r := evs[len(evs)-1].(Done).Reason; r != "stopped" && r != "stop" {
		t.Errorf("Done reason %q", r)
	}
	profiled := false
	for _, ev := range evs {
		_, ok := ev.(ProfileSample)
		profiled = profiled || ok
	}
	if !profiled {
		t.Error("profiling turned on during the reply produced no ProfileSample before its Done")
	}
	waitFor[Loaded](t, e)
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	for _, ev := range waitFor[Done](t, e) {
		if _, ok := ev.(Loaded); ok {
			t.Error("twenty queued switches to one backend reloaded the model more than once")
		}
	}
}

// What the model says about its load (a context beyond its training) reaches
// every client as a Notice right after Loaded.
func TestNotesAreNoticed(t *testing.T) {
	f := testFile(t) // trained on 1024 tokens
	e := New(Options{File: f, Backend: "cpu", Threads: 2, Context: 2048})
	t.Cleanup(e.Close)
	waitFor[Loaded](t, e)
	evs := waitFor[Notice](t, e)
	if n := evs[len(evs)-1].(Notice); !strings.Contains(n.Text, "trained on") {
		t.Errorf("notice %q, want the context beyond the training", n.Text)
	}
}

// TestSwitchModelOpener: SwitchModel opens through Options.Open, so a
// caller's built-in model (no file on disk) can be switched back to.
func TestSwitchModelOpener(t *testing.T) {
	const builtin = "(embedded) test-model"
	f := testFile(t)
	f.Path = builtin
	asks := make(chan string, 4)
	open := func(path string) (*gguf.File, error) {
		asks <- path
		if path == builtin {
			return f, nil
		}
		return gguf.Open(path)
	}
	e := start(t, testFile(t), Options{Open: open})
	e.SwitchModel(builtin)
	evs := waitFor[Loaded](t, e)
	if info := evs[len(evs)-1].(Loaded).Info; info.Path != builtin {
		t.Fatalf("Loaded after switching to the built-in model: %+v", info)
	}
	if len(asks) != 1 || <-asks != builtin {
		t.Fatalf("the opener was not asked for %q alone", builtin)
	}
}

// A first load that fails is refused by Started with its reason, and
// leaves an engine that still switches: the chat it serves can recover
// with another backend instead of being left unable to send.
func TestFailedFirstLoadCanSwitch(t *testing.T) {
	e := New(Options{File: testFile(t), Backend: "no-such-backend", Threads: 2, Context: 256})
	t.Cleanup(e.Close)
	if err := e.Started(); !errors.Is(err, infer.ErrUnknownBackend) {
		t.Fatalf("Started = %v, want ErrUnknownBackend", err)
	}
	evs := waitFor[Error](t, e)
	if err := evs[len(evs)-1].(Error); err.Fatal || !err.NoModel {
		t.Fatalf("first load's error %+v, want NoModel and not Fatal", err)
	}
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	evs = waitFor[Error](t, e)
	if err := evs[len(evs)-1].(Error); !err.NoModel || !errors.Is(err.Err, ErrNoModel) {
		t.Fatalf("a reply without a model: %+v, want ErrNoModel", err)
	}
	e.SwitchBackend("cpu")
	waitFor[Loaded](t, e)
	e.Generate(GenerateRequest{Messages: ask("Hi"), MaxTokens: 2, Sampling: greedy})
	if r := collect(t, e); r.done.Reason != "length" || len(r.errors) > 0 {
		t.Fatalf("after switching to the CPU: %+v, errors %v", r.done, r.errors)
	}
}

// Started returns once the weights are being read, without waiting for
// the whole load, and without taking the front end's events.
func TestStartedKeepsEvents(t *testing.T) {
	e := New(Options{File: testFile(t), Backend: "cpu", Threads: 2, Context: 256})
	t.Cleanup(e.Close)
	if err := e.Started(); err != nil {
		t.Fatal(err)
	}
	waitFor[Loaded](t, e)
}

// A long prompt's reading is reported from its start (Done 0) and in
// steps, never as one jump after the first whole batch.
func TestPrefillProgressFromTheStart(t *testing.T) {
	e := start(t, testFile(t), Options{Context: 1024})
	e.Generate(GenerateRequest{Messages: ask(strings.Repeat("a tree grows ", 100)), MaxTokens: 1, Sampling: greedy})
	var progress []PrefillProgress
	for _, ev := range waitFor[Done](t, e) {
		if p, ok := ev.(PrefillProgress); ok {
			progress = append(progress, p)
		}
	}
	if len(progress) < 3 || progress[0].Done != 0 {
		t.Fatalf("progress %v: want it from 0, in several steps", progress)
	}
	last := progress[len(progress)-1]
	if last.Done != last.Total || last.Total < 300 {
		t.Errorf("progress ends at %d of %d", last.Done, last.Total)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Done <= progress[i-1].Done {
			t.Errorf("progress went from %d to %d", progress[i-1].Done, progress[i].Done)
		}
	}
}

// CountTokens measures messages as the prompt a reply reads: the same
// count the reply's prefill reports on a fresh cache.
func TestCountTokens(t *testing.T) {
	e := start(t, testFile(t), Options{})
	msgs := ask("How many tokens is this prompt, with its template?")
	n, err := e.CountTokens(msgs, false)
	if err != nil {
		t.Fatal(err)
	}
	e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 1, Sampling: greedy})
	if r := collect(t, e); r.done.Stats.PrefillTokens != n {
		t.Errorf("CountTokens = %d, the reply read %d", n, r.done.Stats.PrefillTokens)
	}
	none := New(Options{Path: "/nonexistent.gguf"})
	defer none.Close()
	if _, err := none.CountTokens(msgs, false); err == nil {
		t.Error("counted without a tokenizer")
	}
}

// A GPU refusal over software adapters (auto's reason for the CPU, a
// switch's or a first load's error) says how to admit one.
func TestSoftwareAdapterHint(t *testing.T) {
	soft := errors.New("backend gpu: gpu: only software adapters (llvmpipe (LLVM 15)); they are used only when allowed or named: no GPU adapter")
	if got := withSoftwareHint(soft); !errors.Is(got, soft) || !strings.Contains(got.Error(), "BONSAI_GPU_SOFTWARE=1") {
		t.Errorf("software adapter refused: %q", got)
	}
	other := errors.New("backend gpu: out of GPU memory")
	if got := withSoftwareHint(other); got != other {
		t.Errorf("another reason: %q", got)
	}
}
