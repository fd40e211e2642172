// Package remote is an engine.Client that answers from another
// OpenAI-compatible server (bonsai serve, llama-server, vLLM, ollama, LM
// Studio): for models bigger than this machine, served across GPUs or
// hosts. The chat drives it as it drives the local engine; what a remote
// server does not report (its KV cache, memory, per-phase profile) is
// said to be unknown rather than shown as zero.
//
// Speed is measured here, on the client: time to first token from the
// request to the first streamed text, decode tok/s over the tokens after
// it. The context size comes from what the server reports in /models
// (llama-server's meta.n_ctx, vLLM's max_model_len) or the configuration.
package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/openai"
)

// Errors a caller may branch on; each comes wrapped with what to do.
var (
	ErrUnreachable  = errors.New("remote server unreachable")
	ErrUnauthorized = errors.New("remote server refused the API key")
	ErrNoModel      = errors.New("remote server has no such model")
	ErrStreamCut    = errors.New("remote stream ended before the reply did")
	ErrNoFirstToken = errors.New("remote server sent no first token")
	ErrServer       = errors.New("remote server error")
	ErrStalled      = errors.New("remote server stopped sending")
	ErrNotOpenAI    = errors.New("not an OpenAI-compatible API")
	ErrRedirect     = errors.New("remote server redirects elsewhere")
)

// Timeouts used when Options leave them 0.
const (
	// DefaultFirstTokenTimeout bounds the wait for a reply's first token (a
	// big prompt on a busy server takes a while).
	DefaultFirstTokenTimeout = 3 * time.Minute
	// DefaultIdleTimeout bounds the silence between two stream events once
	// the first token came: a server that decodes sends one every few
	// tokens, so a minute of nothing means it has stalled.
	DefaultIdleTimeout = time.Minute
	// DefaultRequestTimeout bounds a whole request that is not a reply
	// (the model list): a few kilobytes of JSON.
	DefaultRequestTimeout = 30 * time.Second
)

// maxMessage bounds the server text an error quotes (an error page may be
// megabytes of HTML).
const maxMessage = 300

// Options configure a remote engine.
type Options struct {
	// BaseURL is the server's OpenAI base URL, e.g. http://host:8000/v1.
	BaseURL string
	APIKey  string
	// Model to ask for; "" takes the first the server lists.
	Model string
	// Name labels the backend ("remote:NAME" in the status line).
	Name string
	// Context is the context size when the server does not say (0:
	// unknown).
	Context int
	// FirstTokenTimeout bounds the wait for the first token (0:
	// DefaultFirstTokenTimeout).
	FirstTokenTimeout time.Duration
	// IdleTimeout bounds the silence between stream events after the first
	// token (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// RequestTimeout bounds the model list request, body included (0:
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
	// HTTPClient, if set, sends the requests (its redirect policy is
	// replaced: see noForeignRedirects).
	HTTPClient *http.Client
	// Protocol is the API the replies are asked in ("": ChatCompletions).
	Protocol Protocol
}

// Engine implements engine.Client over HTTP.
type Engine struct {
	opts   Options
	base   string
	client *http.Client
	events chan engine.Event

	// ctx ends when the engine is closed: every request is made under it,
	// so Close never waits on a server.
	ctx     context.Context
	quit    context.CancelFunc
	mu      sync.Mutex
	queue   []engine.GenerateRequest
	cancel  context.CancelFunc // the request in flight
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}

	model   string
	context int
}

// New starts a remote engine: it lists the server's models, then reports
// Loaded (or an Error saying what to do, and Loaded with what is known, so
// that the chat can try again).
func New(opts Options) *Engine {
	c := &http.Client{}
	if opts.HTTPClient != nil {
		*c = *opts.HTTPClient
	}
	c.CheckRedirect = noForeignRedirects
	opts.FirstTokenTimeout = orDefault(opts.FirstTokenTimeout, DefaultFirstTokenTimeout)
	opts.IdleTimeout = orDefault(opts.IdleTimeout, DefaultIdleTimeout)
	opts.RequestTimeout = orDefault(opts.RequestTimeout, DefaultRequestTimeout)
	e := &Engine{
		opts: opts, base: strings.TrimRight(opts.BaseURL, "/"), client: c,
		events: make(chan engine.Event, 256), wake: make(chan struct{}, 1),
		done: make(chan struct{}), stopped: make(chan struct{}),
	}
	e.ctx, e.quit = context.WithCancel(context.Background())
	go e.run()
	return e
}

func (e *Engine) Events() <-chan engine.Event { return e.events }

func (e *Engine) Generate(req engine.GenerateRequest) {
	e.mu.Lock()
	if !e.closed {
		e.queue = append(e.queue, req)
	}
	e.mu.Unlock()
	e.poke()
}

// Stop cancels the request in flight: its partial reply stays, and Done
// says "stopped". Queued requests are dropped too.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.cancel != nil {
		e.cancel()
	}
	e.queue = nil
	e.mu.Unlock()
}

// SwitchBackend and SwitchModel have no meaning for a remote server: the
// chat replaces the engine to go back to a local backend.
func (e *Engine) SwitchBackend(name string) {
	e.emit(engine.Error{Err: fmt.Errorf("the %s backend is a remote server: /backend %s needs the local engine", e.backendName(), name)})
}

func (e *Engine) SwitchModel(path string) {
	e.emit(engine.Error{Err: fmt.Errorf("the %s backend is a remote server: it cannot load %s; choose the server's model in the config", e.backendName(), path)})
}

// Reset does nothing: the server keeps no conversation of ours (its own
// prompt cache, if any, works from the messages).
func (e *Engine) Reset() {}

func (e *Engine) Close() {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		e.quit()
		close(e.done)
	}
	e.mu.Unlock()
	<-e.stopped
}

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) emit(ev engine.Event) bool {
	select {
	case e.events <- ev:
		return true
	case <-e.done:
		return false
	}
}

func (e *Engine) backendName() string {
	if e.opts.Name != "" {
		return "remote:" + e.opts.Name
	}
	return "remote"
}

func (e *Engine) run() {
	defer close(e.stopped)
	defer close(e.events)
	e.connect()
	for {
		select {
		case <-e.done:
			return
		case <-e.wake:
		}
		for {
			e.mu.Lock()
			if len(e.queue) == 0 || e.closed {
				e.mu.Unlock()
				break
			}
			req := e.queue[0]
			e.queue = e.queue[1:]
			ctx, cancel := context.WithCancel(e.ctx)
			e.cancel = cancel
			e.mu.Unlock()
			e.generate(ctx, req)
			e.mu.Lock()
			e.cancel = nil
			e.mu.Unlock()
			cancel()
		}
	}
}

// connect lists the models and reports Loaded.
func (e *Engine) connect() {
	e.emit(engine.LoadProgress{Stage: "connecting to " + e.base})
	e.model, e.context = e.opts.Model, e.opts.Context
	models, err := e.models()
	if err == nil {
		err = e.pick(models)
	}
	if err != nil {
		e.emit(engine.Error{Err: err})
	}
	name := e.model
	if name == "" {
		name = "(unknown model)"
	}
	details := []string{
		"remote server at " + e.base,
		"time to first token and tok/s are measured on this machine, network included",
		"KV cache, memory and per-phase profile: not reported by a remote server",
	}
	if e.context == 0 {
		details = append(details, "context size: the server did not say (set context_size for this remote in config.toml)")
	}
	e.emit(engine.Loaded{Info: engine.ModelInfo{
		Path: e.base, Name: name, Arch: "remote", Variant: name, ContextSize: e.context,
		Backend: e.backendName(), Adapter: e.base, Details: details,
	}})
}

// Model is one entry of /models with the context size fields servers use.
type Model struct {
	ID      string
	Context int // 0: not said
}

// Models lists the server's models, within the request timeout.
func (e *Engine) models() ([]Model, error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/models", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	e.auth(req)
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.transportError(err, e.opts.RequestTimeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, e.statusError(resp)
	}
	if err := e.notWebPage(resp, "/models"); err != nil {
		return nil, err
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			Meta        *struct {
				NCtx      int `json:"n_ctx"`
				NCtxTrain int `json:"n_ctx_train"`
			} `json:"meta"`
			ContextLength int `json:"context_length"` // LM Studio, OpenRouter
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		if ctx.Err() != nil {
			return nil, e.transportError(ctx.Err(), e.opts.RequestTimeout)
		}
		return nil, fmt.Errorf("%w: %s/models is not a model list: %w", ErrServer, e.base, err)
	}
	var out []Model
	for _, d := range list.Data {
		m := Model{ID: d.ID, Context: d.MaxModelLen}
		if d.Meta != nil && d.Meta.NCtx > 0 {
			m.Context = d.Meta.NCtx
		}
		if m.Context == 0 {
			m.Context = d.ContextLength
		}
		out = append(out, m)
	}
	return out, nil
}

func (e *Engine) pick(models []Model) error {
	if len(models) == 0 {
		return fmt.Errorf("%w: %s/models lists none", ErrNoModel, e.base)
	}
	var ids []string
	for _, m := range models {
		ids = append(ids, m.ID)
		if e.model == "" || m.ID == e.model {
			e.model = m.ID
			if m.Context > 0 {
				e.context = m.Context
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %q; it serves %s: set model in the [[remote]] entry", ErrNoModel, e.model, clip(strings.Join(ids, ", ")))
}

func (e *Engine) auth(req *http.Request) {
	if e.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.opts.APIKey)
	}
}

// transportError says why a request got no answer; timeout is the
// deadline it ran under.
func (e *Engine) transportError(err error, timeout time.Duration) error {
	var op *net.OpError
	switch {
	case errors.Is(err, ErrRedirect):
		return fmt.Errorf("%s: %w", e.base, errors.Unwrap(err)) // the *url.Error's inner error says it all
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s did not answer within %s: is it a running OpenAI-compatible server (the URL with its /v1)?", ErrUnreachable, e.base, timeout)
	case errors.As(err, &op):
		return fmt.Errorf("%w: %s: is the server running, and the URL right (with its /v1)? %w", ErrUnreachable, e.base, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, e.base, err)
}

// noForeignRedirects is the client's redirect policy. A POST is never
// followed (it would replay the conversation, and the API key, to an
// address the user did not give), nor a GET to another scheme, host or
// port; the error names the address so the user can configure it.
func noForeignRedirects(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case first.Method != http.MethodGet:
		return fmt.Errorf("%w: %s %s redirects to %s; set that address as the remote URL if it is the server you mean", ErrRedirect, first.Method, first.URL, req.URL)
	case req.URL.Scheme != first.URL.Scheme || req.URL.Host != first.URL.Host:
		return fmt.Errorf("%w: %s redirects to %s; set that address as the remote URL if it is the server you mean", ErrRedirect, first.URL, req.URL)
	case len(via) >= 10:
		return fmt.Errorf("%w: %s: %d redirects", ErrRedirect, first.URL, len(via))
	}
	return nil
}

// notWebPage refuses a 200 answer that is an HTML page: a web server or a
// proxy's page at that URL, not an OpenAI-compatible API.
func (e *Engine) notWebPage(resp *http.Response, path string) error {
	if !isWebPage(resp) {
		return nil
	}
	return fmt.Errorf("%w: %s%s answers with a web page; give the server's OpenAI base URL (often ending in /v1)", ErrNotOpenAI, e.base, path)
}

func isWebPage(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// statusError reads an error response: the OpenAI error object if there
// is one.
func (e *Engine) statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(body))
	var eo struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &eo) == nil && len(eo.Error) > 0 {
		var b openai.ErrorBody
		if json.Unmarshal(eo.Error, &b) == nil && b.Message != "" {
			msg = b.Message
		} else {
			var s string
			if json.Unmarshal(eo.Error, &s) == nil {
				msg = s // ollama: {"error": "…"}
			}
		}
	} else if isWebPage(resp) {
		msg = "a web page, not an OpenAI-compatible API error; is the URL the server's OpenAI base (often ending in /v1)?"
	}
	msg = clip(msg)
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (%s): %s; give the right key (api_key_env of the [[remote]] entry, --remote-key-env of bonsai run)", ErrUnauthorized, resp.Status, msg)
	case http.StatusNotFound:
		if strings.Contains(strings.ToLower(msg), "model") {
			return fmt.Errorf("%w: %s; %s/models lists what it serves", ErrNoModel, msg, e.base)
		}
	}
	return fmt.Errorf("%w: %s: %s", ErrServer, clip(resp.Status), msg)
}

// clip bounds a server's text quoted in an error to maxMessage bytes, cut
// at a character boundary.
func clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// generate streams one reply.
func (e *Engine) generate(ctx context.Context, r engine.GenerateRequest) {
	start := time.Now()
	stats := engine.Stats{ContextSize: e.context}
	done := func(reason string) { e.emit(engine.Done{Reason: reason, Stats: stats}) }
	body, err := e.requestBodyFor(r)
	if err != nil {
		e.emit(engine.Error{Err: err})
		done("stopped")
		return
	}
	// The first token must come within FirstTokenTimeout; after it, the
	// stream may take as long as the reply does, as long as it never falls
	// silent for IdleTimeout.
	reqCtx, reqCancel := context.WithCancelCause(ctx)
	defer reqCancel(nil)
	stalled := fmt.Errorf("%w for %s in the middle of the reply; the partial reply is kept (regenerate to try again)", ErrStalled, e.opts.IdleTimeout)
	watch := newSilence(reqCancel, e.opts.FirstTokenTimeout,
		fmt.Errorf("%w after %s: the server may be overloaded or the prompt too long for it", ErrNoFirstToken, e.opts.FirstTokenTimeout))
	defer watch.stop()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, e.base+e.path(), bytes.NewReader(body))
	if err != nil {
		e.emit(engine.Error{Err: err})
		done("stopped")
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	e.auth(req)
	e.protocolHeaders(req)
	fail := func(err error) {
		if ctx.Err() != nil { // Stop: not an error
			done("stopped")
			return
		}
		if cause := context.Cause(reqCtx); errors.Is(cause, ErrNoFirstToken) || errors.Is(cause, ErrStalled) {
			err = cause
		}
		e.emit(engine.Error{Err: err})
		done("stopped") // the partial reply stays, as a stopped one
	}
	resp, err := e.client.Do(req)
	if err != nil {
		fail(e.transportError(err, e.opts.FirstTokenTimeout))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail(e.statusError(resp))
		return
	}
	if err := e.notWebPage(resp, e.path()); err != nil {
		fail(err)
		return
	}
	think := chat.NewThinkParser(false)
	tokens := 0
	var first time.Time
	finish := ""
	out := func(text string, thinking bool) bool {
		if text == "" {
			return true
		}
		if first.IsZero() {
			first = time.Now()
			watch.reset(e.opts.IdleTimeout, stalled)
			stats.TTFT = first.Sub(start)
		}
		if thinking {
			return e.emit(engine.Token{Text: text, Thinking: true})
		}
		for _, s := range think.Feed(text) {
			if s.Text != "" && !e.emit(engine.Token{Text: s.Text, Thinking: s.Thinking}) {
				return false
			}
		}
		return true
	}
	events := openai.NewEventReader(resp.Body)
	for {
		data, err := events.Next()
		if err != nil {
			if err == io.EOF && finish != "" {
				break // a server that closes without [DONE] after the last chunk
			}
			if reqCtx.Err() != nil {
				fail(err)
				return
			}
			fail(fmt.Errorf("%w after %d tokens: %v; the partial reply is kept (regenerate to try again)", ErrStreamCut, tokens, err))
			return
		}
		if !first.IsZero() {
			watch.reset(e.opts.IdleTimeout, stalled)
		}
		ev, err := e.decodeEvent(data)
		if err != nil {
			fail(err)
			return
		}
		if !out(ev.reasoning, true) || !out(ev.content, false) {
			return
		}
		if ev.content != "" || ev.reasoning != "" {
			tokens++
		}
		if ev.finish != "" {
			finish = ev.finish
		}
		if u := ev.usage; u != nil {
			if u.PromptTokens > 0 {
				stats.PrefillTokens = u.PromptTokens
			}
			if u.CompletionTokens > 0 {
				tokens = u.CompletionTokens
			}
			stats.ContextUsed = u.TotalTokens
			if u.TotalTokens == 0 && stats.PrefillTokens > 0 { // Anthropic's last usage counts only the output
				stats.ContextUsed = stats.PrefillTokens + tokens
			}
		}
		stats.DecodeTokens = tokens
		if !first.IsZero() && tokens > 1 {
			stats.DecodeTPS = float64(tokens-1) / time.Since(first).Seconds()
		}
		if ev.reply && !e.emit(stats) {
			return
		}
		if ev.end {
			break
		}
	}
	for _, s := range think.Flush() {
		if s.Text != "" {
			e.emit(engine.Token{Text: s.Text, Thinking: s.Thinking})
		}
	}
	stats.DecodeTokens = tokens
	if !first.IsZero() && tokens > 1 {
		stats.DecodeTPS = float64(tokens-1) / time.Since(first).Seconds()
	}
	switch finish {
	case "length":
		done("length")
	case "":
		fail(fmt.Errorf("%w: [DONE] without a finish reason after %d tokens", ErrStreamCut, tokens))
	default:
		done("stop")
	}
}

// silence ends a request when the server says nothing for too long: first
// the wait for the first token, then each gap between stream events.
type silence struct {
	mu     sync.Mutex
	t      *time.Timer
	cause  error
	cancel context.CancelCauseFunc
}

func newSilence(cancel context.CancelCauseFunc, d time.Duration, cause error) *silence {
	s := &silence{cancel: cancel, cause: cause}
	s.t = time.AfterFunc(d, s.fire)
	return s
}

func (s *silence) fire() {
	s.mu.Lock()
	cause := s.cause
	s.mu.Unlock()
	s.cancel(cause)
}

// reset restarts the wait: d from now, the request ends with cause.
func (s *silence) reset(d time.Duration, cause error) {
	s.mu.Lock()
	s.cause = cause
	s.t.Reset(d)
	s.mu.Unlock()
}

func (s *silence) stop() { s.t.Stop() }

type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"` // llama-server, vLLM, DeepSeek
			Reasoning        string `json:"reasoning"`         // ollama, OpenRouter
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openai.Usage `json:"usage"`
	Error *chunkError   `json:"error"`
}

// chunkError is an error event in a stream: an OpenAI error object or a
// plain string.
type chunkError struct{ raw json.RawMessage }

func (c *chunkError) UnmarshalJSON(b []byte) error {
	c.raw = append(json.RawMessage(nil), b...)
	return nil
}

func (c *chunkError) message() string {
	var b openai.ErrorBody
	if json.Unmarshal(c.raw, &b) == nil && b.Message != "" {
		return b.Message
	}
	var s string
	if json.Unmarshal(c.raw, &s) == nil {
		return s
	}
	return string(c.raw)
}

// requestBody is the chat request for r: its messages, thinking switch
// and sampling; usage asked for, since some servers (vLLM) send none
// unless asked.
func (e *Engine) requestBody(r engine.GenerateRequest) ([]byte, error) {
	if r.Raw != "" {
		return nil, errors.New("a remote backend takes conversations, not raw prompts: drop --raw")
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	msgs := make([]message, 0, len(r.Messages))
	for _, m := range r.Messages {
		msgs = append(msgs, message{Role: m.Role, Content: m.Content})
	}
	body := map[string]any{
		"model": e.model, "messages": msgs, "stream": true,
		"stream_options":       map[string]bool{"include_usage": true},
		"chat_template_kwargs": map[string]bool{"enable_thinking": r.Think},
	}
	if r.MaxTokens > 0 {
		body["max_tokens"] = r.MaxTokens
	}
	if s := r.Sampling; s != nil {
		body["temperature"] = s.Temperature
		if s.TopK > 0 {
			body["top_k"] = s.TopK
		}
		if s.TopP > 0 && s.TopP < 1 {
			body["top_p"] = s.TopP
		}
		if s.MinP > 0 {
			body["min_p"] = s.MinP
		}
		if s.RepeatPenalty > 0 && s.RepeatPenalty != 1 {
			body["repeat_penalty"] = s.RepeatPenalty
		}
		if s.Seed != 0 {
			body["seed"] = int64(s.Seed >> 1) // servers read seeds as signed
		}
	}
	return json.Marshal(body)
}

var _ engine.Client = (*Engine)(nil)
