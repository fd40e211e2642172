package remote

import (
	"fmt"
	"strings"
	"sync"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// Resolver finds a configured remote by name ([[remote]] in config.toml).
type Resolver func(name string) (Options, error)

// Switcher is the chat's engine when remotes are configured: it answers
// from the local engine or from a remote server, and SwitchBackend moves
// between them: "remote:NAME" connects to the named server, "cpu", "gpu"
// or "auto" comes back to the local engine (which stays loaded meanwhile,
// so coming back is instant). Events of the engine not in use are dropped.
type Switcher struct {
	local   engine.Client // nil: the chat started on a remote, without a local model
	resolve Resolver
	events  chan engine.Event
	done    chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	cur     engine.Client
	remotes map[string]*Engine
	loaded  map[engine.Client]engine.Loaded // the last Loaded of each
	closed  bool
}

// NewSwitcher starts on first: the local engine, or a remote one (then
// local may be nil). resolve may be nil when no remote is configured.
func NewSwitcher(local, first engine.Client, resolve Resolver) *Switcher {
	s := &Switcher{
		local: local, resolve: resolve, cur: first,
		events: make(chan engine.Event, 256), done: make(chan struct{}),
		remotes: map[string]*Engine{}, loaded: map[engine.Client]engine.Loaded{},
	}
	if r, ok := first.(*Engine); ok {
		s.remotes[r.opts.Name] = r
	}
	if local != nil {
		s.forward(local)
	}
	if first != local {
		s.forward(first)
	}
	return s
}

// forward passes c's events on while c is the engine in use.
func (s *Switcher) forward(c engine.Client) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for ev := range c.Events() {
			s.mu.Lock()
			if l, ok := ev.(engine.Loaded); ok {
				s.loaded[c] = l
			}
			current := s.cur == c
			s.mu.Unlock()
			if !current {
				continue
			}
			select {
			case s.events <- ev:
			case <-s.done:
				return
			}
		}
	}()
}

func (s *Switcher) current() engine.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *Switcher) Events() <-chan engine.Event         { return s.events }
func (s *Switcher) Generate(req engine.GenerateRequest) { s.current().Generate(req) }
func (s *Switcher) Stop()                               { s.current().Stop() }
func (s *Switcher) SwitchModel(path string)             { s.current().SwitchModel(path) }
func (s *Switcher) Reset()                              { s.current().Reset() }

func (s *Switcher) emit(ev engine.Event) {
	select {
	case s.events <- ev:
	case <-s.done:
	}
}

// BindSession and ForgetSession reach the local engine, which saves its
// model state per session (engine.Engine.BindSession), whichever engine
// is in use.
func (s *Switcher) BindSession(id int64) {
	if b, ok := s.local.(interface{ BindSession(int64) }); ok {
		b.BindSession(id)
	}
}

func (s *Switcher) ForgetSession(id int64) {
	if f, ok := s.local.(interface{ ForgetSession(int64) }); ok {
		f.ForgetSession(id)
	}
}

// SetProfiling reaches the local engine (a remote one has no profile).
func (s *Switcher) SetProfiling(on bool) {
	if p, ok := s.current().(interface{ SetProfiling(bool) }); ok {
		p.SetProfiling(on)
	}
}

// SwitchBackend moves to "remote:NAME" or back to the local engine's
// "cpu", "gpu" or "auto".
func (s *Switcher) SwitchBackend(name string) {
	if rest, ok := strings.CutPrefix(name, "remote:"); ok {
		s.toRemote(rest)
		return
	}
	if s.local == nil {
		s.emit(engine.Error{Err: fmt.Errorf("the chat started on a remote server, without a local model: restart without --remote to use %s", name)})
		return
	}
	s.mu.Lock()
	wasLocal := s.cur == s.local
	s.cur = s.local
	l, ok := s.loaded[s.local]
	s.mu.Unlock()
	if !wasLocal && ok {
		s.emit(l) // the local model is as it was: say so
		if l.Info.Backend == name || name == "auto" {
			return
		}
	}
	s.local.SwitchBackend(name)
}

func (s *Switcher) toRemote(name string) {
	s.mu.Lock()
	r, known := s.remotes[name]
	s.mu.Unlock()
	if !known {
		if s.resolve == nil {
			s.emit(engine.Error{Err: fmt.Errorf("no remote %q: add a [[remote]] entry to config.toml", name)})
			return
		}
		opts, err := s.resolve(name)
		if err != nil {
			s.emit(engine.Error{Err: err})
			return
		}
		opts.Name = name
		r = New(opts)
		s.mu.Lock()
		s.remotes[name] = r
		s.cur = r
		s.mu.Unlock()
		s.forward(r) // its Loaded comes through
		return
	}
	s.mu.Lock()
	s.cur = r
	l, ok := s.loaded[r]
	s.mu.Unlock()
	if ok {
		s.emit(l)
	}
}

// Close closes every engine it made or was given.
func (s *Switcher) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	all := []engine.Client{}
	if s.local != nil {
		all = append(all, s.local)
	}
	for _, r := range s.remotes {
		all = append(all, r)
	}
	s.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
	s.wg.Wait()
	close(s.events)
}

var _ engine.Client = (*Switcher)(nil)
