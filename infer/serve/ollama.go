package serve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/grammar"
	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// ollama's native API (/api/…), which Open WebUI, Continue and many editor
// plugins speak: chat and generate stream newline-delimited JSON objects
// unless "stream": false asks for one; errors are {"error": "…"}.

// ollamaVersion is the ollama release whose API these routes follow (its
// Go client drives them in the tests); /api/version reports it, since
// clients gate features on it.
const ollamaVersion = "0.17.4"

type ollamaMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking,omitempty"`
	Images     []json.RawMessage `json:"images,omitempty"`
	ToolCalls  []ollamaToolCall  `json:"tool_calls,omitempty"`
	ToolName   string            `json:"tool_name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaOptions are the model options bonsai applies; the others (num_ctx,
// num_gpu, …) configure an ollama runner and are ignored, as ollama
// ignores the ones a model does not use.
type ollamaOptions struct {
	Temperature      *float32       `json:"temperature"`
	TopP             *float32       `json:"top_p"`
	TopK             *int           `json:"top_k"`
	MinP             *float32       `json:"min_p"`
	Seed             *int64         `json:"seed"`
	NumPredict       *int           `json:"num_predict"`
	Stop             openai.Strings `json:"stop"`
	RepeatPenalty    *float32       `json:"repeat_penalty"`
	RepeatLastN      *int           `json:"repeat_last_n"`
	PresencePenalty  *float32       `json:"presence_penalty"`
	FrequencyPenalty *float32       `json:"frequency_penalty"`
}

// ollamaThink is think: a boolean, or an effort ("low", "medium", "high")
// that turns thinking on.
type ollamaThink struct{ on bool }

func (t *ollamaThink) UnmarshalJSON(b []byte) error {
	var on bool
	if json.Unmarshal(b, &on) == nil {
		t.on = on
		return nil
	}
	var effort string
	if err := json.Unmarshal(b, &effort); err != nil {
		return fmt.Errorf("think must be true, false, \"low\", \"medium\" or \"high\"")
	}
	t.on = effort != "" && effort != "none"
	return nil
}

type ollamaChatRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	Stream   *bool           `json:"stream"`
	Format   json.RawMessage `json:"format"`
	Tools    []openai.Tool   `json:"tools"`
	Options  *ollamaOptions  `json:"options"`
	Think    *ollamaThink    `json:"think"`
}

type ollamaGenerateRequest struct {
	Model    string            `json:"model"`
	Prompt   string            `json:"prompt"`
	Suffix   string            `json:"suffix"`
	System   string            `json:"system"`
	Context  []int             `json:"context"`
	Stream   *bool             `json:"stream"`
	Raw      bool              `json:"raw"`
	Format   json.RawMessage   `json:"format"`
	Options  *ollamaOptions    `json:"options"`
	Think    *ollamaThink      `json:"think"`
	Images   []json.RawMessage `json:"images"`
	Template string            `json:"template"`
}

// ollamaMetrics end a reply: counts, and durations in nanoseconds.
type ollamaMetrics struct {
	TotalDuration      int64 `json:"total_duration,omitempty"`
	LoadDuration       int64 `json:"load_duration,omitempty"`
	PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
	EvalCount          int   `json:"eval_count,omitempty"`
	EvalDuration       int64 `json:"eval_duration,omitempty"`
}

type ollamaChatResponse struct {
	Model      string        `json:"model"`
	CreatedAt  time.Time     `json:"created_at"`
	Message    ollamaMessage `json:"message"`
	Done       bool          `json:"done"`
	DoneReason string        `json:"done_reason,omitempty"`
	ollamaMetrics
}

type ollamaGenerateResponse struct {
	Model      string           `json:"model"`
	CreatedAt  time.Time        `json:"created_at"`
	Response   string           `json:"response"`
	Thinking   string           `json:"thinking,omitempty"`
	Done       bool             `json:"done"`
	DoneReason string           `json:"done_reason,omitempty"`
	ToolCalls  []ollamaToolCall `json:"tool_calls,omitempty"`
	ollamaMetrics
}

type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// ollamaFail writes an error in ollama's shape.
func ollamaFail(e *apiError, w http.ResponseWriter) {
	writeJSON(w, e.status, map[string]string{"error": e.msg})
}

// ollamaName is the model's name in ollama's name:tag form.
func (m *Model) ollamaName() string {
	if strings.Contains(m.ID, ":") {
		return m.ID
	}
	return m.ID + ":latest"
}

// answersToOllama is answersTo for an ollama name, whose tag ":latest"
// is the default.
func (m *Model) answersToOllama(name string) bool {
	return m.answersTo(name) || m.answersTo(strings.TrimSuffix(name, ":latest"))
}

func (m *Model) ollamaDetails() ollamaDetails {
	arch := m.model.Hparams.Arch
	return ollamaDetails{Format: "gguf", Family: arch, Families: []string{arch}, ParameterSize: paramSize(m.Params), QuantizationLevel: m.quantization()}
}

// quantization names the type that holds most of the weights' bytes
// ("Q1_0"), as ollama's quantization_level does.
func (m *Model) quantization() string {
	bytes := map[string]int64{}
	best := ""
	for _, t := range m.model.File.Tensors {
		name := strings.ToUpper(t.Type.String())
		bytes[name] += t.Size
		if best == "" || bytes[name] > bytes[best] {
			best = name
		}
	}
	return best
}

// paramSize is a parameter count as ollama writes it: "1.7B", "600M".
func paramSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	}
	return fmt.Sprint(n)
}

// digest names the loaded model in the listings: a hash of its id and
// size, not of the file (which is not read again to hash it).
func (m *Model) digest() string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d", m.ID, m.FileBytes))
	return hex.EncodeToString(h[:])
}

func (s *Server) ollamaRoot(w http.ResponseWriter, _ *http.Request, _ *Model) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("bonsai is running (with ollama's API)"))
}

func (s *Server) ollamaVersion(w http.ResponseWriter, _ *http.Request, _ *Model) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

func (s *Server) ollamaTags(w http.ResponseWriter, _ *http.Request, m *Model) {
	type entry struct {
		Name       string        `json:"name"`
		Model      string        `json:"model"`
		ModifiedAt time.Time     `json:"modified_at"`
		Size       int64         `json:"size"`
		Digest     string        `json:"digest"`
		Details    ollamaDetails `json:"details"`
	}
	writeJSON(w, http.StatusOK, map[string][]entry{"models": {{Name: m.ollamaName(), Model: m.ollamaName(), ModifiedAt: s.started,
		Size: m.FileBytes, Digest: m.digest(), Details: m.ollamaDetails()}}})
}

func (s *Server) ollamaPS(w http.ResponseWriter, _ *http.Request, m *Model) {
	type entry struct {
		Name          string        `json:"name"`
		Model         string        `json:"model"`
		Size          int64         `json:"size"`
		Digest        string        `json:"digest"`
		Details       ollamaDetails `json:"details"`
		ExpiresAt     time.Time     `json:"expires_at"`
		SizeVRAM      int64         `json:"size_vram"`
		ContextLength int           `json:"context_length"`
	}
	var vram int64
	if m.Info.Name == "gpu" {
		vram = m.FileBytes
	}
	// The model stays loaded while the server runs: a year from now is
	// what a client that shows the expiry can show.
	writeJSON(w, http.StatusOK, map[string][]entry{"models": {{Name: m.ollamaName(), Model: m.ollamaName(), Size: m.FileBytes,
		Digest: m.digest(), Details: m.ollamaDetails(), ExpiresAt: time.Now().AddDate(1, 0, 0).UTC(), SizeVRAM: vram, ContextLength: m.Sched.Context()}}})
}

func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request, m *Model) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	if !m.answersToOllama(name) {
		ollamaFail(&apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model '%s' not found", name)}, w)
		return
	}
	hp := m.model.Hparams
	arch := hp.Arch
	caps := []string{"completion", "tools"}
	if opensThinkingAny(m) {
		caps = append(caps, "thinking")
	}
	d := m.Defaults
	writeJSON(w, http.StatusOK, map[string]any{
		"modelfile":  "FROM " + m.ID + "\n",
		"parameters": fmt.Sprintf("temperature %g\ntop_k %d\ntop_p %g\nmin_p %g", d.Temperature, d.TopK, d.TopP, d.MinP),
		"details":    m.ollamaDetails(),
		"model_info": map[string]any{
			"general.architecture":            arch,
			"general.parameter_count":         m.Params,
			arch + ".context_length":          m.ContextTrain,
			arch + ".embedding_length":        hp.Embed,
			arch + ".block_count":             hp.Layers,
			arch + ".attention.head_count":    hp.Heads,
			arch + ".attention.head_count_kv": hp.KVHeads,
			"tokenizer.ggml.vocab_size":       m.Tok.Vocab(),
		},
		"capabilities": caps,
		"modified_at":  s.started,
	})
}

// opensThinkingAny says the template has a thinking mode: its generation
// prompt differs with thinking on and off.
func opensThinkingAny(m *Model) bool {
	on, off := m.Tmpl.Pieces(nil, true, true), m.Tmpl.Pieces(nil, true, false)
	if len(on) != len(off) {
		return true
	}
	for i := range on {
		if on[i].Text != off[i].Text {
			return true
		}
	}
	return false
}

// knobs fills a chat request's sampling fields from the options.
func (o *ollamaOptions) apply(req *openai.ChatRequest) {
	if o == nil {
		return
	}
	req.Temperature, req.TopP, req.TopK, req.MinP, req.Seed = o.Temperature, o.TopP, o.TopK, o.MinP, o.Seed
	req.Stop, req.RepeatPenalty, req.RepeatLastN = o.Stop, o.RepeatPenalty, o.RepeatLastN
	req.PresencePenalty, req.FrequencyPenalty = o.PresencePenalty, o.FrequencyPenalty
	if n := o.NumPredict; n != nil && *n > 0 { // -1: no limit, -2: until the context is full
		req.MaxTokens = n
	}
}

// ollamaFormat is format as a response_format: "json", a JSON schema, or
// nothing.
func ollamaFormat(raw json.RawMessage) (*openai.ResponseFormat, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte(`""`)) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "json" {
			return nil, badRequest("format", `format must be "json" or a JSON schema, not %q`, s)
		}
		return &openai.ResponseFormat{Type: "json_object"}, nil
	}
	if raw[0] != '{' {
		return nil, badRequest("format", `format must be "json" or a JSON schema`)
	}
	return &openai.ResponseFormat{Type: "json_schema", JSONSchema: &openai.JSONSchema{Name: "format", Schema: raw}}, nil
}

// ollamaStreamOn is stream's value: on unless false.
func ollamaStreamOn(b *bool) bool { return b == nil || *b }

func (req *ollamaChatRequest) chat(m *Model) (*openai.ChatRequest, *apiError) {
	if !m.answersToOllama(req.Model) {
		return nil, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model '%s' not found", req.Model)}
	}
	out := &openai.ChatRequest{Tools: req.Tools}
	req.Options.apply(out)
	rf, aerr := ollamaFormat(req.Format)
	if aerr != nil {
		return nil, aerr
	}
	out.ResponseFormat = rf
	if req.Think != nil {
		on := req.Think.on
		out.ChatTemplateKwargs = &openai.TemplateKwargs{EnableThinking: &on}
	}
	for i, msg := range req.Messages {
		if len(msg.Images) > 0 {
			return nil, badRequest(fmt.Sprintf("messages[%d].images", i), "images are not supported: this model reads text")
		}
		o := openai.Message{Role: msg.Role, Content: openai.Content(msg.Content), ReasoningContent: msg.Thinking, ToolCallID: msg.ToolCallID, Name: msg.ToolName}
		for _, tc := range msg.ToolCalls {
			args := bytes.TrimSpace(tc.Function.Arguments)
			if len(args) == 0 || bytes.Equal(args, []byte("null")) {
				args = []byte("{}")
			}
			o.ToolCalls = append(o.ToolCalls, openai.ToolCall{ID: tc.ID, Type: "function", Function: openai.FunctionCall{Name: tc.Function.Name, Arguments: string(args)}})
		}
		out.Messages = append(out.Messages, o)
	}
	return out, nil
}

// ollamaCalls are tool calls in ollama's shape (arguments as an object).
func ollamaCalls(calls []toolCall, first int) []ollamaToolCall {
	var out []ollamaToolCall
	for i, c := range calls {
		var tc ollamaToolCall
		tc.ID = c.ID
		tc.Function.Index, tc.Function.Name, tc.Function.Arguments = first+i, c.Name, argsObject(c.Arguments)
		out = append(out, tc)
	}
	return out
}

func ollamaDone(o outcome) string {
	if o.finish == "length" {
		return "length"
	}
	return "stop"
}

func ollamaMetricsOf(o outcome, start time.Time) ollamaMetrics {
	r := o.res
	return ollamaMetrics{TotalDuration: int64(time.Since(start)), PromptEvalCount: r.PromptTokens,
		PromptEvalDuration: int64(r.TTFT - r.Queued), EvalCount: r.CompletionTokens, EvalDuration: int64(r.Decode)}
}

// ndjson writes one JSON object a line, flushed at once.
type ndjson struct {
	w http.ResponseWriter
	f http.Flusher
}

func newNDJSON(w http.ResponseWriter) *ndjson {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &ndjson{w: w, f: f}
}

func (n *ndjson) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return err
	}
	if n.f != nil {
		n.f.Flush()
	}
	return nil
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request, m *Model) {
	start := time.Now()
	var req ollamaChatRequest
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	name := req.Model
	creq, aerr := req.chat(m)
	if aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	if len(req.Messages) == 0 { // ollama loads the model and answers done
		writeJSON(w, http.StatusOK, ollamaChatResponse{Model: name, CreatedAt: time.Now().UTC(), Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "load"})
		return
	}
	var nd *ndjson
	var emit func(delta) error
	calls := 0
	if ollamaStreamOn(req.Stream) {
		emit = func(d delta) error {
			if nd == nil {
				nd = newNDJSON(w)
			}
			msg := ollamaMessage{Role: "assistant", Content: d.content, Thinking: d.reasoning, ToolCalls: ollamaCalls(d.calls, calls)}
			calls += len(d.calls)
			return nd.send(ollamaChatResponse{Model: name, CreatedAt: time.Now().UTC(), Message: msg})
		}
	}
	c, o, aerr, gone := s.generate(r.Context(), m, creq, emit)
	if gone {
		return
	}
	if aerr != nil {
		if nd != nil {
			nd.send(map[string]string{"error": aerr.msg})
			return
		}
		ollamaFail(aerr, w)
		return
	}
	last := ollamaChatResponse{Model: name, CreatedAt: time.Now().UTC(), Message: ollamaMessage{Role: "assistant"}, Done: true,
		DoneReason: ollamaDone(o), ollamaMetrics: ollamaMetricsOf(o, start)}
	if emit == nil {
		last.Message = ollamaMessage{Role: "assistant", Content: replyText(c), Thinking: c.out.reasoning.String(), ToolCalls: ollamaCalls(c.out.calls, 0)}
		writeJSON(w, http.StatusOK, last)
		return
	}
	if nd == nil {
		nd = newNDJSON(w)
	}
	nd.send(last)
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request, m *Model) {
	start := time.Now()
	var req ollamaGenerateRequest
	if aerr := s.decodeBody(w, r, &req); aerr != nil {
		ollamaFail(aerr, w)
		return
	}
	if !m.answersToOllama(req.Model) {
		ollamaFail(&apiError{status: http.StatusNotFound, msg: fmt.Sprintf("model '%s' not found", req.Model)}, w)
		return
	}
	for field, set := range map[string]bool{"suffix": req.Suffix != "", "images": len(req.Images) > 0,
		"context": len(req.Context) > 0, "template": req.Template != ""} {
		if set {
			ollamaFail(badRequest(field, "%s is not supported: send the conversation to /api/chat (or the whole prompt with raw: true)", field), w)
			return
		}
	}
	name := req.Model
	if req.Prompt == "" && req.System == "" { // ollama loads the model and answers done
		writeJSON(w, http.StatusOK, ollamaGenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Done: true, DoneReason: "load"})
		return
	}
	var nd *ndjson
	var emit func(delta) error
	if ollamaStreamOn(req.Stream) {
		emit = func(d delta) error {
			if nd == nil {
				nd = newNDJSON(w)
			}
			return nd.send(ollamaGenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Response: d.content, Thinking: d.reasoning})
		}
	}
	var text, thinking string
	var o outcome
	var aerr *apiError
	gone := false
	if req.Raw {
		var b strings.Builder
		o, aerr, gone = s.generateRaw(r, m, &req, func(t string) error {
			b.WriteString(t)
			if emit == nil || t == "" {
				return nil
			}
			return emit(delta{content: t})
		})
		text = b.String()
	} else {
		creq := &openai.ChatRequest{}
		req.Options.apply(creq)
		creq.ResponseFormat, aerr = ollamaFormat(req.Format)
		if req.Think != nil {
			on := req.Think.on
			creq.ChatTemplateKwargs = &openai.TemplateKwargs{EnableThinking: &on}
		}
		if req.System != "" {
			creq.Messages = append(creq.Messages, openai.Message{Role: "system", Content: openai.Content(req.System)})
		}
		creq.Messages = append(creq.Messages, openai.Message{Role: "user", Content: openai.Content(req.Prompt)})
		if aerr == nil {
			var c *chatCall
			c, o, aerr, gone = s.generate(r.Context(), m, creq, emit)
			if c != nil {
				text, thinking = c.out.content.String(), c.out.reasoning.String()
			}
		}
	}
	if gone {
		return
	}
	if aerr != nil {
		if nd != nil {
			nd.send(map[string]string{"error": aerr.msg})
			return
		}
		ollamaFail(aerr, w)
		return
	}
	last := ollamaGenerateResponse{Model: name, CreatedAt: time.Now().UTC(), Done: true, DoneReason: ollamaDone(o), ollamaMetrics: ollamaMetricsOf(o, start)}
	if emit == nil {
		last.Response, last.Thinking = text, thinking
		writeJSON(w, http.StatusOK, last)
		return
	}
	if nd == nil {
		nd = newNDJSON(w)
	}
	nd.send(last)
}

// generateRaw runs a raw generate: the prompt's tokens as they are, with
// no template (as /v1/completions), format enforced by the grammar.
func (s *Server) generateRaw(r *http.Request, m *Model, req *ollamaGenerateRequest, emit func(string) error) (outcome, *apiError, bool) {
	k := openai.ChatRequest{}
	req.Options.apply(&k)
	g, aerr := settings(m, knobs{maxTokens: k.MaxTokens, temperature: k.Temperature, topP: k.TopP, minP: k.MinP, topK: k.TopK,
		repeatLastN: k.RepeatLastN, seed: k.Seed, stop: k.Stop, presence: k.PresencePenalty, frequency: k.FrequencyPenalty, repeatP: k.RepeatPenalty})
	if aerr != nil {
		return outcome{}, aerr, false
	}
	rf, aerr := ollamaFormat(req.Format)
	if aerr != nil {
		return outcome{}, aerr, false
	}
	var constraint slots.Constraint
	if rf != nil {
		sch, aerr := requestSchema(rf, nil, "")
		if aerr != nil {
			return outcome{}, aerr, false
		}
		constraint = grammar.NewConstraint(m.grammarVocab(), grammar.NewMachine(sch))
	}
	if n := len(req.Prompt) / m.maxPiece; n >= m.Sched.Context() {
		return outcome{}, tooLong(n, m), false
	}
	release, aerr := s.tokenizing(r.Context())
	if aerr != nil {
		return outcome{}, aerr, false
	}
	prompt := m.Tok.Encode(req.Prompt, true)
	release()
	if m.Tok.AddBOS() && m.Tok.BOS() >= 0 {
		prompt = append([]int32{m.Tok.BOS()}, prompt...)
	}
	o, aerr := run(r.Context(), m, prompt, g, constraint, func(p piece) error { return emit(p.text) })
	if aerr != nil {
		return o, aerr, false
	}
	if o.err != nil {
		if r.Context().Err() != nil {
			return o, nil, true
		}
		s.opts.Log.Error("generation failed", "route", r.URL.Path, "err", o.err)
		return o, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "generation failed: " + o.err.Error()}, false
	}
	return o, nil, false
}
