package serve_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/serve"
)

// apiError reads an OpenAI error body.
func apiError(t *testing.T, r answer) (msg, param, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("not an error object: %d %s", r.status, r.body)
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Message, param, code
}

// A field of the wrong type is told in the API's words, not Go's.
func TestTypeErrorsInAPIWords(t *testing.T) {
	s := startServer(t, "", 1)
	for _, c := range []struct{ body, msg string }{
		{`{"messages":"hi"}`, "messages must be an array of message objects, not a string"},
		{`[{"messages":[]}]`, "the request body must be a JSON object, not an array"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":"5"}`, "max_tokens must be an integer, not a string"},
		{`{"messages":[{"role":"assistant","tool_calls":{}}]}`, "messages.tool_calls must be an array of tool call objects, not an object"},
		{`{"messages":[{"role":"user","content":"x"}],"stream":1}`, "stream must be a boolean, not a number"},
	} {
		r := post(t, s, "/v1/chat/completions", c.body)
		if msg, _, _ := apiError(t, r); r.status != 400 || msg != c.msg {
			t.Errorf("%s: %d %q, want %q", c.body, r.status, msg, c.msg)
		}
	}
}

// The built-in model's file is "(embedded) bonsai-tiny": its id is a clean
// token, the one /v1/models lists, and requests may name it either way.
func TestModelIDIsAToken(t *testing.T) {
	s := startServerOpts(t, serve.Options{}, serve.LoadOptions{Slots: 1, Context: 384, Threads: 2, Backend: "cpu"},
		func(f *gguf.File) { f.Path = "(embedded) bonsai-tiny" })
	r := get(t, s, "/v1/models", "")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "bonsai-tiny" {
		t.Fatalf("/v1/models: %s", r.body)
	}
	for _, id := range []string{"bonsai-tiny", "(embedded) bonsai-tiny"} {
		r := post(t, s, "/v1/chat/completions", `{"model":"`+id+`","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
		if r.status != 200 || !strings.Contains(r.body, `"model":"bonsai-tiny"`) {
			t.Errorf("model %q: %d %s", id, r.status, r.body)
		}
	}
}

// refusedWithin posts body and wants a context_length_exceeded 400 within
// limit (a bound with plenty of slack: the fixed server answers in a tenth
// of it, the unfixed one took 10 to 40 times as long).
func refusedWithin(t *testing.T, s *testServer, path, body string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	r := post(t, s, path, body)
	took := time.Since(start)
	if _, _, code := apiError(t, r); r.status != 400 || code != "context_length_exceeded" {
		t.Errorf("%d %.200s", r.status, r.body)
	}
	if took > limit {
		t.Errorf("refused after %s, more than %s", took, limit)
	}
}

// Item 1 of issue 30: 50,000 tool results, or one assistant turn of
// 50,000 tool calls, took 20 s and 71 s before their 400.
func TestManyToolMessagesRefusedFast(t *testing.T) {
	s := startServer(t, "", 1)
	const n = 50_000
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"user","content":"x"}`)
	for range n {
		b.WriteString(`,{"role":"tool","content":"ok"}`)
	}
	b.WriteString(`]}`)
	refusedWithin(t, s, "/v1/chat/completions", b.String(), 2*time.Second)

	b.Reset()
	b.WriteString(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"type":"function","function":{"name":"f","arguments":"{}"}}`)
	}
	b.WriteString(`]}]}`)
	refusedWithin(t, s, "/v1/chat/completions", b.String(), 2*time.Second)
}

// Item 3: an 8 MB one-word message was tokenized (20 s, 1.3 GB) before
// its 400; what cannot fit the context is refused before tokenizing.
func TestHugeMessageRefusedBeforeTokenizing(t *testing.T) {
	s := startServer(t, "", 1)
	word := strings.Repeat("abcdefghij", (serve.DefaultMaxBody-1000)/10)
	refusedWithin(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+word+`"}]}`, 3*time.Second)
	refusedWithin(t, s, "/v1/completions", `{"prompt":"`+word+`"}`, 3*time.Second)
}

// Item 5: a body sent a byte at a time is answered with a 408 and its
// connection closed once BodyTimeout passes (headers had a timeout; bodies
// had none, and held their connections).
func TestSlowBodyTimedOut(t *testing.T) {
	s := startServerOpts(t, serve.Options{BodyTimeout: time.Second}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 384, Threads: 2, Backend: "cpu"}, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.root, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	start := time.Now()
	answered := make(chan *http.Response, 1)
	closed := make(chan struct{})
	go func() {
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			resp = nil
		}
		answered <- resp
		io.Copy(io.Discard, br) // until the server closes the connection
		close(closed)
	}()
	for {
		select {
		case resp := <-answered:
			if resp == nil || resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("the slow body's answer: %v", resp)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("answered after %s", took)
			}
			answered = nil
		case <-closed:
			if answered != nil {
				t.Error("the connection closed without an answer")
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("closed after %s", took)
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("a body sent a byte every 200 ms is still open after 20 s; the timeout is 1 s")
		}
		conn.Write([]byte(" "))
	}
}

// Item 8: ignore_eos bans the end tokens, but a constrained reply that is
// whole can only end: it finishes with "stop" and its JSON, where it was
// a 500 "the constraint allows no token" (streamed: the JSON, then an
// error event).
func TestIgnoreEOSWithConstraintFinishes(t *testing.T) {
	s := startServer(t, "", 1)
	format := `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}`
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}],"tool_choice":"required"`
	for _, constraint := range []string{format, tools} {
		body := `{"messages":[{"role":"user","content":"x"}],"ignore_eos":true,"max_tokens":200,"seed":1,` + constraint + `}`
		r := post(t, s, "/v1/chat/completions", body)
		var resp struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(r.body), &resp); err != nil || r.status != 200 || len(resp.Choices) != 1 {
			t.Errorf("%s: %d %s", constraint, r.status, r.body)
			continue
		}
		ch := resp.Choices[0]
		text := ""
		if ch.Message.Content != nil {
			text = *ch.Message.Content
		}
		if len(ch.Message.ToolCalls) == 1 {
			text = ch.Message.ToolCalls[0].Function.Arguments
		}
		var v struct{ OK *bool }
		if err := json.Unmarshal([]byte(text), &v); err != nil || v.OK == nil || (ch.FinishReason != "stop" && ch.FinishReason != "tool_calls") {
			t.Errorf("%s: finish %q, %q: %v", constraint, ch.FinishReason, text, err)
		}
		r = post(t, s, "/v1/chat/completions", strings.Replace(body, "{", `{"stream":true,`, 1))
		if r.status != 200 || strings.Contains(r.body, `"error"`) || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
			t.Errorf("%s, streamed: %d %s", constraint, r.status, r.body)
		}
	}
}

// Item 7: cached_tokens told a client how much of its prompt matched
// another client's, so a secret could be guessed a token at a time. Only
// the same conversation's earlier turns count now; the cache itself still
// serves both.
func TestCachedTokensOnlyOwnConversation(t *testing.T) {
	s := startServer(t, "", 1) // one slot: every request meets the last one's tokens
	usage := func(body string) (cached int) {
		t.Helper()
		r := post(t, s, "/v1/chat/completions", body)
		var resp struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Timings struct {
				CacheN int `json:"cache_n"`
			} `json:"timings"`
		}
		if err := json.Unmarshal([]byte(r.body), &resp); err != nil || r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if resp.Timings.CacheN != resp.Usage.Details.Cached {
			t.Errorf("timings.cache_n %d, usage's cached_tokens %d", resp.Timings.CacheN, resp.Usage.Details.Cached)
		}
		return resp.Usage.Details.Cached
	}
	secret := `{"role":"system","content":"The vault code is 4417 and must never be told."}`
	first := `{"max_tokens":4,"temperature":0,"messages":[` + secret + `,{"role":"user","content":"Hi"}]}`
	r := post(t, s, "/v1/chat/completions", first)
	var reply struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(r.body), &reply); err != nil || len(reply.Choices) != 1 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	answer, _ := json.Marshal(reply.Choices[0].Message.Content)
	// The same conversation's next turn: its earlier turn is cached and told.
	if cached := usage(`{"max_tokens":2,"messages":[` + secret + `,{"role":"user","content":"Hi"},{"role":"assistant","content":` + string(answer) + `},{"role":"user","content":"And?"}]}`); cached < 10 {
		t.Errorf("the next turn of a conversation was told of %d cached tokens", cached)
	}
	before := metricValue(t, get(t, s, "/metrics", "").body, "bonsai_prompt_tokens_cached_total")
	// Another client guessing the secret: most of its prompt matches, and
	// it is not told.
	guess := `{"max_tokens":2,"messages":[{"role":"system","content":"The vault code is 4418"}]}`
	if cached := usage(guess); cached != 0 {
		t.Errorf("a guess at another client's prompt was told of %d cached tokens", cached)
	}
	if after := metricValue(t, get(t, s, "/metrics", "").body, "bonsai_prompt_tokens_cached_total"); after-before < 5 {
		t.Errorf("the guess reused %v cached tokens: the cache no longer serves shared prefixes", after-before)
	}
}

// send does one request with the given Host (if set) and headers.
func send(t *testing.T, s *testServer, method, path, host, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.root+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Item 6: a keyless server answered any Host and any web page: a POST of
// text/plain from http://attacker.example got a completion, so any page
// could drive it (and, with DNS rebinding, read the replies).
func TestKeylessServerRefusesCrossSite(t *testing.T) {
	load := serve.LoadOptions{ID: testModel, Slots: 1, Context: 384, Threads: 2, Backend: "cpu"}
	s := startServerOpts(t, serve.Options{Hosts: []string{"bonsai.lan"}}, load, nil)
	const chat = `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.root, "http://"))
	for _, c := range []struct {
		name, host string
		headers    []string
		status     int
	}{
		{"a page's simple POST", "attacker.example:" + port, []string{"Content-Type", "text/plain", "Origin", "http://attacker.example"}, 403},
		{"DNS rebinding", "attacker.example:" + port, nil, 403},
		{"a foreign origin", "", []string{"Origin", "http://attacker.example"}, 403},
		{"a sandboxed page", "", []string{"Origin", "null"}, 403},
		{"localhost", "localhost:" + port, nil, 200},
		{"[::1]", "[::1]:" + port, nil, 200},
		{"the bound name", "bonsai.lan:" + port, nil, 200},
		{"a local web app", "", []string{"Origin", "http://localhost:5173"}, 200},
	} {
		resp, body := send(t, s, http.MethodPost, "/v1/chat/completions", c.host, chat, c.headers...)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %.200s", c.name, resp.StatusCode, body)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS headers without --cors", c.name)
		}
	}
	// With a key, the key guards: any name will do.
	keyed := startServerOpts(t, serve.Options{APIKey: "k"}, load, nil)
	if resp, body := send(t, keyed, http.MethodPost, "/v1/chat/completions", "bonsai.example.com", chat, "Authorization", "Bearer k"); resp.StatusCode != 200 {
		t.Errorf("a keyed server by another name: %d %s", resp.StatusCode, body)
	}
}

// --cors lets named web apps call the server from a browser: preflights
// are answered, replies carry the headers; other origins still are not.
func TestCORSOptIn(t *testing.T) {
	app := "https://app.example"
	s := startServerOpts(t, serve.Options{CORS: []string{app}}, serve.LoadOptions{ID: testModel, Slots: 1, Context: 384, Threads: 2, Backend: "cpu"}, nil)
	resp, _ := send(t, s, http.MethodOptions, "/v1/chat/completions", "", "", "Origin", app,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if h := resp.Header; resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body := send(t, s, http.MethodPost, "/v1/chat/completions", "", `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`,
		"Origin", app, "Content-Type", "application/json")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("the app's request: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = send(t, s, http.MethodOptions, "/v1/chat/completions", "", "", "Origin", "https://other.example", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

// Item 4: a json_schema of a 75,000-value enum is refused at admission
// (its masks stalled every slot for a second a token).
func TestHugeEnumRefused(t *testing.T) {
	s := startServer(t, "", 1)
	vals := make([]string, 75_000)
	for i := range vals {
		vals[i] = fmt.Sprintf("%x", uint32(i)*2654435761)
	}
	enum, _ := json.Marshal(vals)
	start := time.Now()
	r := post(t, s, "/v1/chat/completions", `{"max_tokens":5,"messages":[{"role":"user","content":"x"}],`+
		`"response_format":{"type":"json_schema","json_schema":{"name":"e","schema":{"enum":`+string(enum)+`}}}}`)
	if _, param, code := apiError(t, r); r.status != 400 || code != "unsupported_schema" || param != "response_format.json_schema.schema" {
		t.Errorf("%d %.300s", r.status, r.body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("refused after %s", took)
	}
}
