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
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

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
)

// DefaultFirstTokenTimeout is how long a request waits for its first token
// when Options.FirstTokenTimeout is 0 (a big prompt on a busy server takes
// a while).
const DefaultFirstTokenTimeout = 3 * time.Minute

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
	// FirstTokenTimeout bounds the wait for the first token.
	FirstTokenTimeout time.Duration
	// HTTPClient, if set, sends the requests.
	HTTPClient *http.Client
}

// Engine implements engine.Client over HTTP.
type Engine struct {
	opts   Options
	base   string
	client *http.Client
	events chan engine.Event

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
	c := opts.HTTPClient
	if c == nil {
		c = &http.Client{}
	}
	if opts.FirstTokenTimeout <= 0 {
		opts.FirstTokenTimeout = DefaultFirstTokenTimeout
	}
	e := &Engine{
		opts: opts, base: strings.TrimRight(opts.BaseURL, "/"), client: c,
		events: make(chan engine.Event, 256), wake: make(chan struct{}, 1),
		done: make(chan struct{}), stopped: make(chan struct{}),
	}
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
		if e.cancel != nil {
			e.cancel()
		}
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
			ctx, cancel := context.WithCancel(context.Background())
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
	models, err := e.models(context.Background())
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

// Models lists the server's models.
func (e *Engine) models(ctx context.Context) ([]Model, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/models", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	e.auth(req)
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, e.statusError(resp)
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
	return fmt.Errorf("%w: %q; it serves %s: set model in the [[remote]] entry", ErrNoModel, e.model, strings.Join(ids, ", "))
}

func (e *Engine) auth(req *http.Request) {
	if e.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.opts.APIKey)
	}
}

func (e *Engine) transportError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: is the server running, and the URL right (with its /v1)? %w", ErrUnreachable, e.base, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, e.base, err)
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
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (%s): %s; give the right key (api_key_env of the [[remote]] entry, --remote-key-env of bonsai run)", ErrUnauthorized, resp.Status, msg)
	case http.StatusNotFound:
		if strings.Contains(strings.ToLower(msg), "model") {
			return fmt.Errorf("%w: %s; %s/models lists what it serves", ErrNoModel, msg, e.base)
		}
	}
	return fmt.Errorf("%w: %s: %s", ErrServer, resp.Status, msg)
}

// generate streams one reply.
func (e *Engine) generate(ctx context.Context, r engine.GenerateRequest) {
	start := time.Now()
	stats := engine.Stats{ContextSize: e.context}
	done := func(reason string) { e.emit(engine.Done{Reason: reason, Stats: stats}) }
	body, err := e.requestBody(r)
	if err != nil {
		e.emit(engine.Error{Err: err})
		done("stopped")
		return
	}
	// The first token must come within the timeout; after it, the
	// stream may take as long as the reply does.
	firstCtx, firstCancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(e.opts.FirstTokenTimeout, func() {
		firstCancel(fmt.Errorf("%w after %s: the server may be overloaded or the prompt too long for it", ErrNoFirstToken, e.opts.FirstTokenTimeout))
	})
	defer timer.Stop()
	defer firstCancel(nil)
	req, err := http.NewRequestWithContext(firstCtx, http.MethodPost, e.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		e.emit(engine.Error{Err: err})
		done("stopped")
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	e.auth(req)
	fail := func(err error) {
		if ctx.Err() != nil { // Stop: not an error
			done("stopped")
			return
		}
		if cause := context.Cause(firstCtx); cause != nil && errors.Is(cause, ErrNoFirstToken) {
			err = cause
		}
		e.emit(engine.Error{Err: err})
		done("stopped") // the partial reply stays, as a stopped one
	}
	resp, err := e.client.Do(req)
	if err != nil {
		fail(e.transportError(err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail(e.statusError(resp))
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
			timer.Stop()
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
			if ctx.Err() != nil || firstCtx.Err() != nil {
				fail(err)
				return
			}
			fail(fmt.Errorf("%w after %d tokens: %v; the partial reply is kept (regenerate to try again)", ErrStreamCut, tokens, err))
			return
		}
		if data == "[DONE]" {
			break
		}
		var chunk streamChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			fail(fmt.Errorf("%w: a stream event is not JSON: %.200s", ErrServer, data))
			return
		}
		if chunk.Error != nil {
			fail(fmt.Errorf("%w: %s", ErrServer, chunk.Error.message()))
			return
		}
		for _, c := range chunk.Choices {
			if !out(c.Delta.ReasoningContent+c.Delta.Reasoning, true) || !out(c.Delta.Content, false) {
				return
			}
			if c.Delta.Content != "" || c.Delta.ReasoningContent != "" || c.Delta.Reasoning != "" {
				tokens++
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				finish = *c.FinishReason
			}
		}
		if u := chunk.Usage; u != nil {
			stats.PrefillTokens = u.PromptTokens
			stats.ContextUsed = u.TotalTokens
			if u.CompletionTokens > 0 {
				tokens = u.CompletionTokens
			}
		}
		stats.DecodeTokens = tokens
		if !first.IsZero() && tokens > 1 {
			stats.DecodeTPS = float64(tokens-1) / time.Since(first).Seconds()
		}
		if len(chunk.Choices) > 0 && !e.emit(stats) {
			return
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
