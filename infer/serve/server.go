// Package serve is bonsai's OpenAI-compatible HTTP server: chat and text
// completions (streamed as server-sent events or whole), the model list,
// health, Prometheus metrics and tokenization, over a slots.Scheduler that
// decodes the concurrent requests together.
//
// Safe by default: the command binds loopback; with an API key every route
// but /health wants "Authorization: Bearer KEY"; request bodies are
// bounded; a client that goes away stops its generation, which frees its
// slot at the next step.
package serve

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// DefaultMaxBody bounds a request body when Options.MaxBody is 0.
const DefaultMaxBody = 8 << 20

// DefaultBodyTimeout is how long a request body may take to arrive when
// Options.BodyTimeout is 0: a full 8 MB body in it needs 300 kB/s.
const DefaultBodyTimeout = 30 * time.Second

// Options configure a Server.
type Options struct {
	// APIKey, if set, is the bearer token every route but /health wants.
	APIKey string
	// MaxBody bounds request bodies (DefaultMaxBody when 0).
	MaxBody int64
	// BodyTimeout bounds the time a request body takes to arrive after
	// its headers (DefaultBodyTimeout when 0).
	BodyTimeout time.Duration
	// Tokenizers is how many requests may tokenize their prompts at once
	// (0: half the CPUs); the others wait their turn.
	Tokenizers int
	// Hosts are the Host names, beside the loopback ones, that a server
	// without an API key answers to (the address it was told to bind).
	// Without a key every other Host is refused: a web page could
	// otherwise reach a local server through DNS rebinding.
	Hosts []string
	// CORS are the web origins allowed to call the server from a browser
	// ("*": any): their preflights are answered and their replies carry
	// the CORS headers. Without a key a request from any other origin
	// (but a loopback one) is refused.
	CORS []string
	Log  *slog.Logger
}

// Server serves one Model. It answers /health with 503 until SetModel.
type Server struct {
	opts    Options
	model   atomic.Pointer[Model]
	started time.Time
	metrics metrics
	mux     *http.ServeMux
	// tokenizers holds a token for each request tokenizing now.
	tokenizers chan struct{}
}

// New makes a server with no model yet (loading).
func New(opts Options) *Server {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.Tokenizers <= 0 {
		// Half the CPUs: the other half stays with the decoding slots.
		opts.Tokenizers = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, started: time.Now(), mux: http.NewServeMux(), tokenizers: make(chan struct{}, opts.Tokenizers)}
	s.metrics.requests = map[string]int64{}
	s.route("GET /health", false, s.health)
	s.route("GET /v1/health", false, s.health)
	s.route("GET /v1/models", true, s.models)
	s.route("GET /v1/models/{id}", true, s.oneModel)
	s.route("POST /v1/chat/completions", true, s.chat)
	s.route("POST /chat/completions", true, s.chat)
	s.route("POST /v1/completions", true, s.completions)
	s.route("POST /completions", true, s.completions)
	s.route("POST /tokenize", true, s.tokenize)
	s.route("POST /detokenize", true, s.detokenize)
	s.route("GET /metrics", true, s.serveMetrics)
	s.route("POST /v1/responses", true, s.responses)
	s.route("POST /v1/embeddings", true, s.embeddings)
	s.route("POST /embeddings", true, s.embeddings)
	s.routeAs("POST /v1/messages", true, anthropicFail, s.anthropicMessages)
	s.routeAs("POST /v1/messages/count_tokens", true, anthropicFail, s.anthropicCountTokens)
	s.routeAs("GET /{$}", false, ollamaFail, s.ollamaRoot)
	s.routeAs("GET /api/version", false, ollamaFail, s.ollamaVersion)
	s.routeAs("GET /api/tags", true, ollamaFail, s.ollamaTags)
	s.routeAs("GET /api/ps", true, ollamaFail, s.ollamaPS)
	s.routeAs("POST /api/show", true, ollamaFail, s.ollamaShow)
	s.routeAs("POST /api/chat", true, ollamaFail, s.ollamaChat)
	s.routeAs("POST /api/generate", true, ollamaFail, s.ollamaGenerate)
	s.routeAs("POST /api/embed", true, ollamaFail, s.ollamaEmbed)
	s.routeAs("POST /api/embeddings", true, ollamaFail, s.ollamaEmbeddings)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		fail(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path), "", "")
	})
	return s
}

// SetModel makes the server ready.
func (s *Server) SetModel(m *Model) { s.model.Store(m) }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.guard) }

// guard answers CORS preflights and, on a server without a key, refuses
// foreign Host names and cross-site requests, before the routes.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	cors := origin != "" && s.corsAllows(origin)
	if cors {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		if !cors {
			fail(w, http.StatusForbidden, "permission_error", fmt.Sprintf("the origin %q may not call this server (bonsai serve --cors ORIGIN allows it)", origin), "", "cors_refused")
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		// The headers the client asks for: SDKs send their own
		// (openai's x-stainless-*), which a fixed list would refuse.
		allow := "Authorization, Content-Type"
		if asked := r.Header.Get("Access-Control-Request-Headers"); asked != "" && headerList(asked) {
			allow += ", " + asked
		}
		h.Set("Access-Control-Allow-Headers", allow)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.opts.APIKey == "" {
		if !s.hostAllowed(r.Host) {
			fail(w, http.StatusForbidden, "permission_error", fmt.Sprintf("this server answers to localhost, not to %q (with --api-key it answers to any name)", r.Host), "", "host_refused")
			return
		}
		if origin != "" && !cors && !loopbackOrigin(origin) {
			fail(w, http.StatusForbidden, "permission_error", fmt.Sprintf("requests from the web page at %q are refused (bonsai serve --cors ORIGIN allows a web app)", origin), "", "cors_refused")
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// headerList says list is a comma-separated list of header names.
func headerList(list string) bool {
	if len(list) > 4096 {
		return false
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsFunc(name, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) {
			return false
		}
	}
	return true
}

func (s *Server) corsAllows(origin string) bool {
	return slices.ContainsFunc(s.opts.CORS, func(o string) bool { return o == "*" || strings.EqualFold(o, origin) })
}

// hostAllowed says a keyless server answers to the Host header host: a
// loopback name or address, or one of Options.Hosts.
func (s *Server) hostAllowed(host string) bool {
	if host == "" { // HTTP/1.0 without a Host: no name a rebinding page could use
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.Trim(name, "[]"), ".")
	return Loopback(name) || slices.ContainsFunc(s.opts.Hosts, func(h string) bool { return strings.EqualFold(strings.Trim(h, "[]"), name) })
}

// loopbackOrigin says a web origin is served from this machine
// (http://localhost:3000, say): not a cross-site request.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && Loopback(u.Hostname())
}

// Loopback says host names this machine: localhost or a loopback address.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// route registers h at pattern, behind the key check when auth, counting
// the answers by route and status; its own refusals are OpenAI errors.
func (s *Server) route(pattern string, auth bool, h func(http.ResponseWriter, *http.Request, *Model)) {
	s.routeAs(pattern, auth, (*apiError).write, h)
}

// routeAs is route for an API whose errors have another shape: shape
// writes the route's own refusals (a missing key, a loading model).
func (s *Server) routeAs(pattern string, auth bool, shape func(*apiError, http.ResponseWriter), h func(http.ResponseWriter, *http.Request, *Model)) {
	_, path, _ := strings.Cut(pattern, " ")
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		cw := &countingWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() { s.metrics.count(path, cw.status) }()
		if auth && !s.keyOK(r) {
			cw.Header().Set("WWW-Authenticate", `Bearer realm="bonsai"`)
			shape(errUnauthorized, cw)
			return
		}
		m := s.model.Load()
		if m == nil && path != "/health" && path != "/v1/health" {
			shape(&apiError{status: http.StatusServiceUnavailable, typ: "server_error", msg: "the model is loading", code: "model_loading"}, cw)
			return
		}
		r.Body = http.MaxBytesReader(cw, r.Body, s.opts.MaxBody)
		h(cw, r, m)
	})
}

var errUnauthorized = &apiError{status: http.StatusUnauthorized, typ: "authentication_error", msg: "a valid API key is needed: Authorization: Bearer KEY (or x-api-key: KEY)", code: "invalid_api_key"}

func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.keyOK(r) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="bonsai"`)
	errUnauthorized.write(w)
	return false
}

// keyOK says the request carries the server's key (or none is needed), as
// "Authorization: Bearer KEY" or, as Anthropic's clients send it,
// "x-api-key: KEY".
func (s *Server) keyOK(r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		got = r.Header.Get("X-Api-Key")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.APIKey)) == 1
}

// countingWriter remembers the status for the metrics and passes
// flushes on (streaming needs them).
type countingWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (c *countingWriter) WriteHeader(code int) {
	if !c.wrote {
		c.status, c.wrote = code, true
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.wrote = true
	return c.ResponseWriter.Write(b)
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// fail writes an OpenAI-style error.
func fail(w http.ResponseWriter, status int, typ, msg, param, code string) {
	body := openai.ErrorResponse{Error: openai.ErrorBody{Message: msg, Type: typ}}
	if param != "" {
		body.Error.Param = &param
	}
	if code != "" {
		body.Error.Code = &code
	}
	writeJSON(w, status, body)
}

// apiError is a request the server refuses, with what to tell the client.
type apiError struct {
	status      int
	typ         string
	msg         string
	param, code string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...), param: param}
}

func (e *apiError) write(w http.ResponseWriter) { fail(w, e.status, e.typ, e.msg, e.param, e.code) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decode reads a JSON body into v: unknown fields are ignored; a field of
// the wrong type, malformed JSON, anything after the JSON value, a body
// that arrives too slowly or an oversized body is refused.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if aerr := s.decodeBody(w, r, v); aerr != nil {
		aerr.write(w)
		return false
	}
	return true
}

// decodeBody is decode returning the refusal for the caller to write in
// its API's shape.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) *apiError {
	rc := http.NewResponseController(w)
	// The whole body must arrive within BodyTimeout: headers have their
	// own timeout, and a body sent a byte at a time held its connection
	// (and a goroutine) for as long as the client liked.
	// A refused body keeps the deadline: the rest of it, which the server
	// reads to reuse the connection, must come in time too.
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
			if terr != nil && !isSyntax(terr) {
				err = terr
			}
		}
	}
	if err == nil {
		rc.SetReadDeadline(time.Time{}) // the reply may stream for longer
		return nil
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var netErr net.Error
	switch {
	case errors.As(err, &tooBig):
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", msg: fmt.Sprintf("the request body is over %d bytes", tooBig.Limit), code: "request_too_large"}
	case errors.As(err, &netErr) && netErr.Timeout():
		w.Header().Set("Connection", "close")
		return &apiError{status: http.StatusRequestTimeout, typ: "invalid_request_error", msg: fmt.Sprintf("the request body did not arrive within %s", s.opts.BodyTimeout), code: "request_timeout"}
	case errors.As(err, &typeErr):
		return badRequest(typeErr.Field, "%s", typeMessage(typeErr))
	case errors.Is(err, errTrailing):
		return badRequest("", "the request body must be one JSON object, with nothing after it")
	}
	return badRequest("", "the body is not a valid request: %v", err)
}

var errTrailing = errors.New("data after the JSON value")

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// typeMessage says what a field must be in the API's words: "messages
// must be an array of message objects, not a string" rather than Go's
// type names.
func typeMessage(e *json.UnmarshalTypeError) string {
	what := "the request body"
	if e.Field != "" {
		what = e.Field
	}
	return fmt.Sprintf("%s must be %s, not %s", what, jsonKind(e.Type, true), article(e.Value))
}

// jsonKind names the JSON a Go type reads: "an array of message objects".
func jsonKind(t reflect.Type, one bool) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s string
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return a("array of "+jsonKind(t.Elem(), false), one)
	case reflect.Struct, reflect.Map:
		s = "JSON object"
		if name := words(t.Name()); name != "" && t.Kind() == reflect.Struct && !strings.Contains(name, "request") {
			s = name + " object"
		}
	case reflect.String:
		s = "string"
	case reflect.Bool:
		s = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s = "integer"
	case reflect.Float32, reflect.Float64:
		s = "number"
	default:
		s = "JSON value"
	}
	return a(s, one)
}

// words spells a Go type's name as words: ToolCall is "tool call".
func words(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(name[i-1])) {
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// a is "a s" (or "an s") for one, else the plural.
func a(s string, one bool) string {
	if !one {
		if strings.HasSuffix(s, "s") {
			return s
		}
		if noun, rest, ok := strings.Cut(s, " of "); ok {
			return noun + "s of " + rest
		}
		return s + "s"
	}
	return article(s)
}

func article(s string) string {
	if s != "" && strings.ContainsRune("aeiou", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request, m *Model) {
	if m == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "loading model"})
		return
	}
	st := m.Sched.Stats()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "slots_idle": st.Slots - st.Busy, "slots_processing": st.Busy})
}

func (s *Server) modelEntry(m *Model) openai.Model {
	return openai.Model{
		ID: m.ID, Object: "model", Created: s.started.Unix(), OwnedBy: "bonsai", MaxModelLen: m.Sched.Context(),
		Meta: &openai.ModelMeta{NCtx: m.Sched.Context(), NCtxTrain: m.ContextTrain, NVocab: m.Tok.Vocab(), NParams: m.Params, Size: m.FileBytes},
	}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request, m *Model) {
	writeJSON(w, http.StatusOK, openai.ModelList{Object: "list", Data: []openai.Model{s.modelEntry(m)}})
}

func (s *Server) oneModel(w http.ResponseWriter, r *http.Request, m *Model) {
	if !m.answersTo(r.PathValue("id")) {
		fail(w, http.StatusNotFound, "invalid_request_error", fmt.Sprintf("the model %q does not exist; this server runs %q", r.PathValue("id"), m.ID), "model", "model_not_found")
		return
	}
	writeJSON(w, http.StatusOK, s.modelEntry(m))
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, m *Model) {
	var req struct {
		Content    string `json:"content"`
		AddSpecial bool   `json:"add_special"`
		WithPieces bool   `json:"with_pieces"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	release, aerr := s.tokenizing(r.Context())
	if aerr != nil {
		aerr.write(w)
		return
	}
	ids := m.Tok.Encode(req.Content, true)
	release()
	if req.AddSpecial && m.Tok.AddBOS() && m.Tok.BOS() >= 0 {
		ids = append([]int32{m.Tok.BOS()}, ids...)
	}
	if !req.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return
	}
	type piece struct {
		ID    int32  `json:"id"`
		Piece string `json:"piece"`
	}
	out := make([]piece, len(ids))
	for i, id := range ids {
		out[i] = piece{id, m.Tok.Piece(id)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, m *Model) {
	var req struct {
		Tokens []int32 `json:"tokens"`
	}
	if !s.decode(w, r, &req) {
		return
	}
	for _, id := range req.Tokens {
		if id < 0 || int(id) >= m.Tok.Vocab() {
			fail(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("token %d is outside the vocabulary of %d", id, m.Tok.Vocab()), "tokens", "")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": m.Tok.Decode(req.Tokens)})
}

// metrics are the server's own counters beside the scheduler's.
type metrics struct {
	mu       sync.Mutex
	requests map[string]int64 // "route code"
}

func (m *metrics) count(path string, status int) {
	m.mu.Lock()
	m.requests[fmt.Sprintf("%s %d", path, status)]++
	m.mu.Unlock()
}

func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request, m *Model) {
	var b strings.Builder
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP bonsai_%s %s\n# TYPE bonsai_%s %s\n", name, help, name, typ)
	}
	metric("http_requests_total", "counter", "HTTP requests answered, by route and status.")
	s.metrics.mu.Lock()
	for k, n := range s.metrics.requests {
		path, code, _ := strings.Cut(k, " ")
		fmt.Fprintf(&b, "bonsai_http_requests_total{route=%q,code=%q} %d\n", path, code, n)
	}
	s.metrics.mu.Unlock()
	st := m.Sched.Stats()
	rate := func(n int64, sec float64) float64 {
		if sec <= 0 {
			return 0
		}
		return float64(n) / sec
	}
	for _, g := range []struct {
		name, typ, help string
		v               float64
	}{
		{"generations_total", "counter", "Generations finished (any reason).", float64(st.Requests)},
		{"prompt_tokens_total", "counter", "Prompt tokens run through the model (cached ones not counted).", float64(st.PromptTokens)},
		{"prompt_tokens_cached_total", "counter", "Prompt tokens the prompt cache held.", float64(st.CachedTokens)},
		{"generated_tokens_total", "counter", "Tokens generated.", float64(st.Generated)},
		{"prompt_seconds_total", "counter", "Pass time spent on prompt tokens.", st.PromptSeconds},
		{"decode_seconds_total", "counter", "Pass time spent on generated tokens.", st.DecodeSeconds},
		{"prompt_tokens_per_second", "gauge", "Prompt tokens per second of prompt pass time, since start.", rate(st.PromptTokens, st.PromptSeconds)},
		{"decode_tokens_per_second", "gauge", "Tokens decoded per second of decode pass time (all slots together), since start.", rate(st.DecodeTokens, st.DecodeSeconds)},
		{"passes_total", "counter", "Forward passes run.", float64(st.Passes)},
		{"draft_tokens_total", "counter", "Tokens drafted by prompt lookup and verified.", float64(st.Drafted)},
		{"draft_tokens_accepted_total", "counter", "Drafted tokens that the sampled tokens confirmed.", float64(st.Accepted)},
		{"queue_depth", "gauge", "Requests waiting for a slot.", float64(st.Queued)},
		{"slots_busy", "gauge", "Slots generating.", float64(st.Busy)},
		{"slots", "gauge", "Slots.", float64(st.Slots)},
	} {
		metric(g.name, g.typ, g.help)
		fmt.Fprintf(&b, "bonsai_%s %g\n", g.name, g.v)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write([]byte(b.String()))
}

// newID is a response id: prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
