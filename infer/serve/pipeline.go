package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// The Responses, Anthropic and ollama APIs are translations: each request
// becomes an openai.ChatRequest that goes through the chat pipeline
// (prepareChat: the template, sampling, stop strings, grammar and tool
// calls; run: the slots), and each reply is the pipeline's output written
// in the API's own shape.

// delta is what one step of a generation adds, split as the chat pipeline
// splits it: reasoning, answer text and the tool calls completed.
type delta struct {
	reasoning, content string
	calls              []toolCall
}

// generate runs req through the chat pipeline; emit, if set, gets each
// step's delta, the held-back rest at the end included. The reply is then
// in the chatCall's out. A refused request, a failed generation or a
// client gone comes back as an apiError (gone: true when nobody is
// listening any more, and nothing should be written).
func (s *Server) generate(ctx context.Context, m *Model, req *openai.ChatRequest, emit func(delta) error) (c *chatCall, o outcome, aerr *apiError, gone bool) {
	c, aerr = s.prepareChat(ctx, m, req)
	if aerr != nil {
		return nil, o, aerr, false
	}
	c.out = c.newOut()
	sent := 0
	push := func(reasoning, content string) error {
		d := delta{reasoning: reasoning, content: content, calls: c.out.calls[sent:]}
		sent = len(c.out.calls)
		if emit == nil || d.reasoning == "" && d.content == "" && len(d.calls) == 0 {
			return nil
		}
		return emit(d)
	}
	o, aerr = run(ctx, m, c.prompt, c.gen, c.newConstraint(m), func(p piece) error {
		return push(c.out.feed(p.text, false))
	})
	if aerr != nil {
		return c, o, aerr, false
	}
	if o.err == nil {
		o.err = push(c.out.feed("", true))
	}
	if o.err != nil {
		if ctx.Err() != nil {
			return c, o, &apiError{status: 499, typ: "server_error", msg: "the client went away"}, true
		}
		s.opts.Log.Error("generation failed", "err", o.err)
		return c, o, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "generation failed: " + o.err.Error()}, false
	}
	return c, o, nil, false
}

// replyText is the answer's text as the chat route returns it: trimmed
// when tool calls follow it.
func replyText(c *chatCall) string {
	if len(c.out.calls) > 0 {
		return strings.TrimSpace(c.out.content.String())
	}
	return c.out.content.String()
}

// argsObject is a call's arguments as a JSON object (the APIs that carry
// them as objects): the model's text when it is one, else {}.
func argsObject(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// notFound is a model name this server does not answer to.
func notFound(m *Model, name string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
		msg: "the model \"" + name + "\" does not exist; this server runs \"" + m.ID + "\""}
}

// eventStream writes named server-sent events ("event: NAME" then "data:
// JSON"), as the Anthropic and Responses streams are.
type eventStream struct {
	w http.ResponseWriter
	f http.Flusher
}

func newEventStream(w http.ResponseWriter) *eventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &eventStream{w: w, f: f}
}

func (e *eventStream) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var buf strings.Builder
	buf.Grow(len(b) + len(name) + 16)
	buf.WriteString("event: " + name + "\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	if _, err := e.w.Write([]byte(buf.String())); err != nil {
		return err
	}
	if e.f != nil {
		e.f.Flush()
	}
	return nil
}
