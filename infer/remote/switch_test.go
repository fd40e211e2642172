package remote_test

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/remote"
)

// /backend remote:NAME and back: the switcher answers from the server,
// then from the local engine again, which stayed loaded.
func TestSwitcher(t *testing.T) {
	hs := llamaServer.server(t)
	defer hs.Close()
	local := engine.New(engine.Options{File: tinyFile(t), Backend: "cpu", Threads: 2, Context: 256})
	errNoSuch := errors.New("no such remote")
	s := remote.NewSwitcher(local, local, func(name string) (remote.Options, error) {
		if name != "gpu" {
			return remote.Options{}, errNoSuch
		}
		return remote.Options{BaseURL: hs.URL + "/v1"}, nil
	})
	defer s.Close()
	if info, errs := loaded(t, s); info.Backend != "cpu" || len(errs) > 0 {
		t.Fatalf("start: %+v %v", info, errs)
	}
	msgs := []chat.Message{{Role: "user", Content: "hi"}}
	s.Generate(engine.GenerateRequest{Messages: msgs, MaxTokens: 8, Sampling: greedy})
	alone := collect(t, s)

	s.SwitchBackend("remote:gpu")
	if info, errs := loaded(t, s); info.Backend != "remote:gpu" || info.ContextSize != 8192 || len(errs) > 0 {
		t.Fatalf("remote: %+v %v", info, errs)
	}
	s.Generate(engine.GenerateRequest{Messages: msgs})
	if r := collect(t, s); r.text != "Hello world" {
		t.Errorf("the remote answered %q", r.text)
	}

	s.SwitchBackend("cpu")
	if info, errs := loaded(t, s); info.Backend != "cpu" || len(errs) > 0 {
		t.Fatalf("back: %+v %v", info, errs)
	}
	s.Generate(engine.GenerateRequest{Messages: msgs, MaxTokens: 8, Sampling: greedy})
	if r := collect(t, s); r.text != alone.text || r.text == "" {
		t.Errorf("back on the CPU: %q, before %q", r.text, alone.text)
	}

	s.SwitchBackend("remote:nope")
	for ev := range s.Events() {
		if e, ok := ev.(engine.Error); ok {
			if !errors.Is(e.Err, errNoSuch) {
				t.Errorf("an unknown remote: %v", e.Err)
			}
			break
		}
	}
}
