package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
)

func slash(m *Model, text string) {
	m.input.SetValue(text)
	m.submit()
}

// /set changes the sampling and the reply limit of the next replies, refuses
// what it cannot take, /show says what is in force and from where, and the
// values are saved with the session and restored when it is resumed.
func TestSetShowAndResume(t *testing.T) {
	store := openStore(t)
	config := func(model engine.Sampling) engine.Sampling { model.TopK = 7; return model }
	origin := func(name string) string {
		if name == "top_k" {
			return "flag --top-k"
		}
		return ""
	}
	info := fakeengine.DefaultInfo
	info.Sampling = engine.Sampling{Temperature: 0.5, TopP: 0.85, TopK: 20, RepeatPenalty: 1}
	fe := fakeengine.New(fakeengine.Options{Info: info})
	m, _, _ := newTestModel(t, Options{Engine: fe, Store: store, Sampling: config, SettingOrigin: origin}, 120, 40)
	loaded(t, m, fe)
	slash(m, "/set temperature 0.2")
	slash(m, "/set max_tokens 100")
	slash(m, "/set seed 42")
	slash(m, "/set top_p 7")
	contains(t, m.View(), "a number from 0 to 1")
	slash(m, "/set nonsense 1")
	contains(t, m.View(), `no setting "nonsense"`)
	sendAndWait(t, m, fe, "hello")
	req := fe.Requests()[0]
	if s := req.Sampling; s == nil || s.Temperature != 0.2 || s.TopP != 0.85 || s.TopK != 7 || s.Seed != 42 || req.MaxTokens != 100 {
		t.Fatalf("request sampling %+v, max tokens %d", req.Sampling, req.MaxTokens)
	}
	slash(m, "/show")
	v := plain(m.View())
	for _, want := range []string{"temperature     0.2", "/set in this chat", "top_k           7", "flag --top-k",
		"top_p           0.85", "the model's recommendation", "max_tokens      100"} {
		if !strings.Contains(v, want) {
			t.Errorf("/show lacks %q:\n%s", want, v)
		}
	}
	settle(m)
	stored, err := store.Settings(context.Background(), m.sessionID)
	if err != nil || stored["temperature"] != "0.2" || stored["max_tokens"] != "100" {
		t.Fatalf("stored settings %v, %v", stored, err)
	}

	sess, err := store.Load(context.Background(), m.sessionID)
	if err != nil {
		t.Fatal(err)
	}
	fe2 := fakeengine.New(fakeengine.Options{Info: info})
	resumed, _, _ := newTestModel(t, Options{Engine: fe2, Store: store, Resume: sess, Sampling: config}, 120, 40)
	resumed.Update(resumed.initCmd())
	loaded(t, resumed, fe2)
	contains(t, resumed.View(), "This chat's settings")
	sendAndWait(t, resumed, fe2, "again")
	req = fe2.Requests()[0]
	if s := req.Sampling; s == nil || s.Temperature != 0.2 || s.Seed != 42 || req.MaxTokens != 100 {
		t.Fatalf("resumed request sampling %+v, max tokens %d", req.Sampling, req.MaxTokens)
	}
	slash(resumed, "/set temperature default")
	if s := resumed.replySettings(); s.sampling.Temperature != 0.5 {
		t.Errorf("after /set temperature default: %v, want the model's 0.5", s.sampling.Temperature)
	}
}
