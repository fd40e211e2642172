package remote_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/remote"
	"github.com/bonsai-chat/bonsai/infer/serve"
)

// Against bonsai serve: the Responses and Anthropic protocols give the
// reply and the counts the Chat Completions protocol gives.
func TestProtocolsAgainstBonsaiServe(t *testing.T) {
	f := tinyFile(t)
	m, err := serve.LoadFile(f, serve.LoadOptions{ID: "tiny", Slots: 2, Context: 300, Threads: 2, Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := serve.New(serve.Options{APIKey: "k"})
	srv.SetModel(m)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	run := func(p remote.Protocol, msgs []chat.Message) reply {
		e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", APIKey: "k", Protocol: p})
		defer e.Close()
		if _, errs := loaded(t, e); len(errs) > 0 {
			t.Fatalf("%s: %v", p, errs)
		}
		e.Generate(engine.GenerateRequest{Messages: msgs, MaxTokens: 20, Sampling: greedy})
		return collect(t, e)
	}
	for _, msgs := range [][]chat.Message{
		{{Role: "user", Content: "Say hello"}},
		{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Say hello"}},
	} {
		want := run(remote.ChatCompletions, msgs)
		if want.text == "" || len(want.errs) > 0 {
			t.Fatalf("chat completions: %q, %v", want.text, want.errs)
		}
		for _, p := range []remote.Protocol{remote.Responses, remote.Messages} {
			got := run(p, msgs)
			if got.text != want.text || got.done.Reason != want.done.Reason || len(got.errs) > 0 {
				t.Errorf("%s: %q (%s, errors %v); chat completions %q (%s)", p, got.text, got.done.Reason, got.errs, want.text, want.done.Reason)
			}
			if g, w := got.done.Stats, want.done.Stats; g.DecodeTokens != w.DecodeTokens || g.PrefillTokens != w.PrefillTokens || g.ContextUsed != w.ContextUsed {
				t.Errorf("%s: stats %+v; chat completions %+v", p, g, w)
			}
		}
	}
}

// recordedProtocol is a canned server speaking one protocol, with streams
// as llama-server writes them (tools/server/server-task.cpp).
func recordedProtocol(t *testing.T, path string, stream []string, check func(r *http.Request, body map[string]any)) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"qwen3-8b.gguf","object":"model","meta":{"n_ctx":8192}}]}`)
		case path:
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Errorf("request body: %v", err)
			}
			check(r, body)
			w.Header().Set("Content-Type", "text/event-stream")
			for _, line := range stream {
				io.WriteString(w, line+"\n")
				w.(http.Flusher).Flush()
			}
		default:
			http.NotFound(w, r)
		}
	}))
}

func TestRecordedProtocols(t *testing.T) {
	anthropic := []string{
		"event: message_start", `data: {"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","content":[],"model":"qwen3-8b.gguf","stop_reason":null,"stop_sequence":null,"usage":{"cache_read_input_tokens":4,"input_tokens":8,"output_tokens":0}}}`, "",
		"event: content_block_start", `data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`, "",
		"event: content_block_delta", `data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think."}}`, "",
		"event: content_block_stop", `data: {"type":"content_block_stop","index":0}`, "",
		"event: content_block_start", `data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`, "",
		"event: content_block_delta", `data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}`, "",
		"event: content_block_delta", `data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" world"}}`, "",
		"event: content_block_stop", `data: {"type":"content_block_stop","index":1}`, "",
		"event: message_delta", `data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":3}}`, "",
		"event: message_stop", `data: {"type":"message_stop"}`, "",
	}
	responses := []string{
		"event: response.created", `data: {"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress"}}`, "",
		"event: response.in_progress", `data: {"type":"response.in_progress","response":{"id":"resp_1","object":"response","status":"in_progress"}}`, "",
		"event: response.output_item.added", `data: {"type":"response.output_item.added","item":{"id":"rs_1","type":"reasoning","summary":[]}}`, "",
		"event: response.reasoning_text.delta", `data: {"type":"response.reasoning_text.delta","delta":"Let me think.","item_id":"rs_1"}`, "",
		"event: response.output_item.added", `data: {"type":"response.output_item.added","item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`, "",
		"event: response.output_text.delta", `data: {"type":"response.output_text.delta","item_id":"msg_1","delta":"Hello"}`, "",
		"event: response.output_text.delta", `data: {"type":"response.output_text.delta","item_id":"msg_1","delta":" world"}`, "",
		"event: response.completed", `data: {"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":12,"output_tokens":3,"total_tokens":15,"input_tokens_details":{"cached_tokens":4}}}}`, "",
	}
	for _, c := range []struct {
		name    string
		p       remote.Protocol
		path    string
		stream  []string
		reason  string
		headers func(r *http.Request) bool
		fields  []string
	}{
		{"anthropic", remote.Messages, "/v1/messages", anthropic, "length",
			func(r *http.Request) bool {
				return r.Header.Get("x-api-key") == "k" && r.Header.Get("Authorization") == "" && r.Header.Get("anthropic-version") != ""
			},
			[]string{"system", "messages", "max_tokens", "thinking", "top_k"}},
		{"responses", remote.Responses, "/v1/responses", responses, "stop",
			func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer k" },
			[]string{"input", "max_output_tokens", "reasoning", "store"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			hs := recordedProtocol(t, c.path, c.stream, func(r *http.Request, body map[string]any) {
				if !c.headers(r) {
					t.Errorf("headers %v", r.Header)
				}
				for _, f := range c.fields {
					if _, ok := body[f]; !ok {
						t.Errorf("the request has no %s: %v", f, body)
					}
				}
				if c.p == remote.Messages {
					if msgs, _ := body["messages"].([]any); len(msgs) != 1 || body["system"] != "Be brief." {
						t.Errorf("the system prompt is not the system field: %v", body)
					}
				}
			})
			defer hs.Close()
			e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", APIKey: "k", Protocol: c.p})
			defer e.Close()
			if _, errs := loaded(t, e); len(errs) > 0 {
				t.Fatal(errs)
			}
			e.Generate(engine.GenerateRequest{Messages: []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"}},
				Think: true, MaxTokens: 3, Sampling: &engine.Sampling{Temperature: 0.5, TopK: 20}})
			r := collect(t, e)
			if r.text != "Hello world" || r.thinking != "Let me think." || r.done.Reason != c.reason || len(r.errs) > 0 {
				t.Errorf("text %q, thinking %q, done %q, errors %v", r.text, r.thinking, r.done.Reason, r.errs)
			}
			if s := r.done.Stats; s.PrefillTokens != 12 || s.DecodeTokens != 3 || s.ContextUsed != 15 {
				t.Errorf("stats %+v", s)
			}
		})
	}

	// An error event ends the reply with the server's words.
	for _, c := range []struct {
		p      remote.Protocol
		path   string
		stream []string
	}{
		{remote.Messages, "/v1/messages", []string{"event: error", `data: {"type":"error","error":{"type":"overloaded_error","message":"the slots are busy"}}`, ""}},
		{remote.Responses, "/v1/responses", []string{"event: error", `data: {"type":"error","code":"server_error","message":"the slots are busy","sequence_number":0}`, ""}},
	} {
		hs := recordedProtocol(t, c.path, c.stream, func(*http.Request, map[string]any) {})
		e := remote.New(remote.Options{BaseURL: hs.URL + "/v1", Protocol: c.p})
		loaded(t, e)
		e.Generate(engine.GenerateRequest{Messages: []chat.Message{{Role: "user", Content: "hi"}}})
		r := collect(t, e)
		if len(r.errs) != 1 || !errors.Is(r.errs[0], remote.ErrServer) || !strings.Contains(r.errs[0].Error(), "the slots are busy") {
			t.Errorf("%s: errors %v", c.p, r.errs)
		}
		e.Close()
		hs.Close()
	}
}

func TestParseProtocol(t *testing.T) {
	for in, want := range map[string]remote.Protocol{"": remote.ChatCompletions, "openai": remote.ChatCompletions, "Chat": remote.ChatCompletions,
		"responses": remote.Responses, "anthropic": remote.Messages, "messages": remote.Messages} {
		if got, err := remote.ParseProtocol(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := remote.ParseProtocol("grpc"); err == nil {
		t.Error("an unknown protocol was accepted")
	}
}
