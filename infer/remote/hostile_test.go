package remote_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/remote"
)

// within fails the test when f has not returned after d (generous: the
// timeouts under test are a few hundred milliseconds).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %s", what, d)
	}
}

var hi = []chat.Message{{Role: "user", Content: "hi"}}

// stallServer answers /models with headers and then nothing (models) or
// with the model list, and /chat/completions with first (SSE lines) and
// then silence, until the client goes.
func stallServer(t *testing.T, stallModels bool, first string) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" && !stallModels {
			io.WriteString(w, llamaServer.models)
			return
		}
		if r.URL.Path == "/v1/chat/completions" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

// A server that sends the /models headers and then nothing: the connect
// gives up within the request timeout (production default 30 s), with an
// error that says the server did not answer.
func TestModelsHeadersThenNothing(t *testing.T) {
	hs := stallServer(t, true, `{"data":[`)
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", RequestTimeout: 200 * time.Millisecond})
	defer e.Close()
	var errs []error
	within(t, 20*time.Second, "loading from a silent server", func() { _, errs = loaded(t, e) })
	if len(errs) != 1 || !errors.Is(errs[0], remote.ErrUnreachable) || !strings.Contains(errs[0].Error(), "did not answer within 200ms") {
		t.Errorf("errors %v", errs)
	}
}

// Quitting the chat while it connects to a silent server ends at once: the
// chat's Ctrl+C closes the engine, and the process can exit.
func TestCloseWhileConnecting(t *testing.T) {
	hs := stallServer(t, true, "")
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1"}) // the default timeouts, minutes
	for ev := range e.Events() {
		if _, ok := ev.(engine.LoadProgress); ok {
			break // connecting
		}
	}
	within(t, 10*time.Second, "Close while connecting", e.Close)

	// The chat closes a switcher, which closes its remote.
	s := remote.NewSwitcher(nil, remote.New(remote.Options{BaseURL: hs.URL + "/v1"}), nil)
	for ev := range s.Events() {
		if _, ok := ev.(engine.LoadProgress); ok {
			break
		}
	}
	within(t, 10*time.Second, "closing the chat's switcher while connecting", s.Close)
}

// A server that stalls after the first token: the reply ends after the idle
// timeout (production default a minute), keeping the token that came.
func TestStallAfterFirstToken(t *testing.T) {
	hs := stallServer(t, false, `data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}`+"\n\n")
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", IdleTimeout: 200 * time.Millisecond})
	defer e.Close()
	loaded(t, e)
	e.Generate(engine.GenerateRequest{Messages: hi})
	var r reply
	within(t, 20*time.Second, "a stalled reply", func() { r = collect(t, e) })
	if r.text != "Hel" || len(r.errs) != 1 || !errors.Is(r.errs[0], remote.ErrStalled) || r.done.Reason != "stopped" {
		t.Errorf("stalled reply: %+v", r)
	}
}

// Events that keep coming keep a slow reply alive past the idle timeout.
func TestSlowSteadyReplyIsNotStalled(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, llamaServer.models)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for range 6 {
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer hs.Close()
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", IdleTimeout: 2 * time.Second})
	defer e.Close()
	loaded(t, e)
	e.Generate(engine.GenerateRequest{Messages: hi})
	if r := collect(t, e); r.text != "aaaaaa" || len(r.errs) != 0 || r.done.Reason != "stop" {
		t.Errorf("slow reply: %+v", r)
	}
}

// A web page where the API should be is said to be one, not a cut stream
// or a JSON error.
func TestWebPageIsNotAnAPI(t *testing.T) {
	page := func(models bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" && !models {
				io.WriteString(w, llamaServer.models)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><html><body>Welcome to nginx!</body></html>")
		}))
	}
	hs := page(false)
	defer hs.Close()
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1"})
	defer e.Close()
	loaded(t, e)
	e.Generate(engine.GenerateRequest{Messages: hi})
	if r := collect(t, e); len(r.errs) != 1 || !errors.Is(r.errs[0], remote.ErrNotOpenAI) || !strings.Contains(r.errs[0].Error(), "not an OpenAI-compatible API") {
		t.Errorf("an HTML reply: %+v", r)
	}

	hs2 := page(true)
	defer hs2.Close()
	e2 := remote.New(remote.Options{BaseURL: hs2.URL + "/v1"})
	defer e2.Close()
	if _, errs := loaded(t, e2); len(errs) != 1 || !errors.Is(errs[0], remote.ErrNotOpenAI) {
		t.Errorf("an HTML model list: %v", errs)
	}
}

// A redirect to another port of the same host is not followed: neither
// the POST nor the API key reach it; the error names where it pointed.
func TestNoRedirectToAnotherPort(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the API key reached the other port: %s %s", r.Method, r.URL)
		}
		io.WriteString(w, llamaServer.models)
	}))
	defer other.Close()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer hs.Close()
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", APIKey: "secret", Model: "m"})
	defer e.Close()
	if _, errs := loaded(t, e); len(errs) != 1 || !errors.Is(errs[0], remote.ErrRedirect) || !strings.Contains(errs[0].Error(), other.URL) {
		t.Errorf("a redirected model list: %v", errs)
	}
	e.Generate(engine.GenerateRequest{Messages: hi})
	if r := collect(t, e); len(r.errs) != 1 || !errors.Is(r.errs[0], remote.ErrRedirect) {
		t.Errorf("a redirected POST: %+v", r)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the other port", n)
	}
}

// A redirect within the same server (a trailing slash) is still followed
// for the model list.
func TestSameOriginRedirectFollowed(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			http.Redirect(w, r, "/v1/models/", http.StatusMovedPermanently)
			return
		}
		io.WriteString(w, llamaServer.models)
	}))
	defer hs.Close()
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1"})
	defer e.Close()
	if info, errs := loaded(t, e); len(errs) != 0 || info.Name != "qwen3-8b.gguf" {
		t.Errorf("loaded %+v, errors %v", info, errs)
	}
}

// A huge error body is quoted in a few hundred bytes.
func TestServerErrorTextIsBounded(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, llamaServer.models)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, strings.Repeat("é", 32<<10))
	}))
	defer hs.Close()
	e := remote.New(remote.Options{BaseURL: hs.URL + "/v1"})
	defer e.Close()
	loaded(t, e)
	e.Generate(engine.GenerateRequest{Messages: hi})
	r := collect(t, e)
	if len(r.errs) != 1 || !errors.Is(r.errs[0], remote.ErrServer) || len(r.errs[0].Error()) > 1000 {
		t.Fatalf("errors %v", r.errs)
	}
	if msg := r.errs[0].Error(); !strings.HasSuffix(msg, "é…") {
		t.Errorf("not cut at a character: %q", msg[len(msg)-10:])
	}
}
