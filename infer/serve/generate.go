package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// knobs are the sampling fields chat and text completions share.
type knobs struct {
	maxTokens, maxCompletion     *int
	temperature, topP, minP      *float32
	topK, repeatLastN            *int
	seed                         *int64
	stop                         []string
	presence, frequency, repeatP *float32
	n                            *int
	logitBias                    json.RawMessage
}

// gen is one generation's settings.
type gen struct {
	params              sample.Params
	presence, frequency float32
	maxTokens           int
	stops               []string
	logprobs            bool
	top                 int
	ban                 []int32
	bias                map[int32]float32
	own                 int // slots.Request.Own
	n                   int // choices
}

// maxChoices bounds n: each choice is a generation of its own.
const maxChoices = 8

// maxLogitBias bounds the tokens logit_bias may name (OpenAI allows 300).
const maxLogitBias = 1024

// maxStops and maxStopLen bound the stop strings a request may send.
const (
	maxStops   = 16
	maxStopLen = 256
)

// settings checks a request's knobs and fills in the model's
// recommendation for what it leaves out.
func settings(m *Model, k knobs) (gen, *apiError) {
	d := m.Defaults
	g := gen{}
	p := sample.Params{Temperature: d.Temperature, TopK: d.TopK, TopP: d.TopP, MinP: d.MinP,
		RepeatPenalty: d.RepeatPenalty, RepeatLastN: d.RepeatLastN}
	g.n = 1
	if k.n != nil {
		if *k.n < 1 || *k.n > maxChoices {
			return g, badRequest("n", "n must be between 1 and %d, not %d", maxChoices, *k.n)
		}
		g.n = *k.n
	}
	inRange := func(name string, v *float32, lo, hi float32, dst *float32) *apiError {
		if v == nil {
			return nil
		}
		if math.IsNaN(float64(*v)) || *v < lo || *v > hi {
			return badRequest(name, "%s must be between %g and %g, not %g", name, lo, hi, *v)
		}
		*dst = *v
		return nil
	}
	for _, c := range []struct {
		name   string
		v      *float32
		lo, hi float32
		dst    *float32
	}{
		{"temperature", k.temperature, 0, 2, &p.Temperature},
		{"top_p", k.topP, 0, 1, &p.TopP},
		{"min_p", k.minP, 0, 1, &p.MinP},
		{"presence_penalty", k.presence, -2, 2, &g.presence},
		{"frequency_penalty", k.frequency, -2, 2, &g.frequency},
		{"repeat_penalty", k.repeatP, 0, 10, &p.RepeatPenalty},
	} {
		if err := inRange(c.name, c.v, c.lo, c.hi, c.dst); err != nil {
			return g, err
		}
	}
	if k.topK != nil {
		if *k.topK < 0 {
			return g, badRequest("top_k", "top_k must be ≥ 0, not %d", *k.topK)
		}
		p.TopK = *k.topK
	}
	if k.repeatLastN != nil {
		if *k.repeatLastN < 0 || *k.repeatLastN > m.Sched.Context() {
			return g, badRequest("repeat_last_n", "repeat_last_n must be between 0 and the context, not %d", *k.repeatLastN)
		}
		p.RepeatLastN = *k.repeatLastN
	}
	if p.RepeatPenalty != 1 && p.RepeatPenalty != 0 && p.RepeatLastN == 0 {
		p.RepeatLastN = 64
	}
	if k.seed != nil {
		p.Seed = uint64(*k.seed)
	} else {
		p.Seed = uint64(time.Now().UnixNano())
	}
	for _, v := range []struct {
		name string
		n    *int
	}{{"max_tokens", k.maxTokens}, {"max_completion_tokens", k.maxCompletion}} {
		if v.n == nil {
			continue
		}
		if *v.n == -1 { // llama-server's "until the context is full or a stop"
			g.maxTokens = 0
			continue
		}
		if *v.n < 1 {
			return g, badRequest(v.name, "%s must be at least 1 (or −1: no limit), not %d", v.name, *v.n)
		}
		g.maxTokens = *v.n
	}
	if len(k.stop) > maxStops {
		return g, badRequest("stop", "at most %d stop sequences, not %d", maxStops, len(k.stop))
	}
	for _, s := range k.stop {
		if s == "" || len(s) > maxStopLen {
			return g, badRequest("stop", "a stop sequence must have 1 to %d bytes", maxStopLen)
		}
	}
	g.stops, g.params = k.stop, p
	var aerr *apiError
	if g.bias, aerr = m.logitBias(k.logitBias); aerr != nil {
		return g, aerr
	}
	return g, nil
}

// logitBias reads logit_bias: OpenAI's object of token ids (as strings)
// to a bias from −100 to 100, or llama-server's array of [id, bias] pairs,
// where a bias of false bans the token and an id may also be a text
// (each of its tokens gets the bias).
func (m *Model) logitBias(raw json.RawMessage) (map[int32]float32, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var pairs [][2]json.RawMessage
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for k, v := range obj {
			key, _ := json.Marshal(k)
			pairs = append(pairs, [2]json.RawMessage{key, v})
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, badRequest("logit_bias", "logit_bias must map token ids to biases: {\"15339\": -100} or [[15339, -100]]")
	}
	if len(pairs) > maxLogitBias {
		return nil, badRequest("logit_bias", "logit_bias names %d tokens, at most %d", len(pairs), maxLogitBias)
	}
	bias := map[int32]float32{}
	for _, p := range pairs {
		var b float32
		var f bool
		if err := json.Unmarshal(p[1], &b); err != nil {
			if json.Unmarshal(p[1], &f) != nil || f {
				return nil, badRequest("logit_bias", "a logit bias must be a number from -100 to 100 (or false: never), not %s", p[1])
			}
			b = float32(math.Inf(-1))
		} else if math.IsNaN(float64(b)) || b < -100 || b > 100 {
			return nil, badRequest("logit_bias", "a logit bias must be from -100 to 100, not %g", b)
		}
		var ids []int32
		var id int64
		var key string
		switch {
		case json.Unmarshal(p[0], &id) == nil:
		case json.Unmarshal(p[0], &key) == nil:
			n, err := strconv.ParseInt(key, 10, 64)
			if err == nil {
				id = n
				break
			}
			if len(key) > maxStopLen {
				return nil, badRequest("logit_bias", "a logit_bias text must have at most %d bytes", maxStopLen)
			}
			ids = m.Tok.Encode(key, false) // llama-server's: each of the text's tokens
		default:
			return nil, badRequest("logit_bias", "logit_bias keys are token ids, not %s", p[0])
		}
		if ids == nil {
			if id < 0 || id >= int64(m.Tok.Vocab()) {
				return nil, badRequest("logit_bias", "logit_bias names token %d; the vocabulary has %d", id, m.Tok.Vocab())
			}
			ids = []int32{int32(id)}
		}
		for _, t := range ids {
			bias[t] += b
		}
	}
	return bias, nil
}

// submitError maps the scheduler's refusals to API errors.
func submitError(err error) *apiError {
	switch {
	case errors.Is(err, slots.ErrPromptTooLong):
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: err.Error(), param: "messages", code: "context_length_exceeded"}
	case errors.Is(err, slots.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", msg: "the server is shutting down", code: "shutting_down"}
	case errors.Is(err, infer.ErrBadShape):
		return badRequest("", "%v", err)
	}
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
}

// tooLong refuses a prompt of at least n tokens, over the context.
func tooLong(n int, m *Model) *apiError {
	return submitError(fmt.Errorf("%w: at least %d prompt tokens, a slot holds %d", slots.ErrPromptTooLong, n, m.Sched.Context()))
}

// tokenizing waits for a turn to tokenize a request (or for the client to
// give up): at most Options.Tokenizers requests tokenize at once, so that
// many large requests at once cannot take all the CPU and memory.
func (s *Server) tokenizing(ctx context.Context) (release func(), _ *apiError) {
	select {
	case s.tokenizers <- struct{}{}:
		return func() { <-s.tokenizers }, nil
	case <-ctx.Done():
		return nil, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", msg: "the request was cancelled while waiting", code: "cancelled"}
	}
}

// piece is what one step of a generation adds: its text (after stop
// strings) and the tokens sampled.
type piece struct {
	text string
	toks []slots.Token
}

// outcome is how a generation ended.
type outcome struct {
	finish string // "stop", "length"
	stop   string // the stop string that ended it, if one did
	res    slots.Result
	err    error // the generation failed
}

// run submits prompt and calls emit with each step's text until the
// generation ends: by an end token, a stop string (the text before it is
// the last emitted), the limit, or the client going away (ctx).
func run(ctx context.Context, m *Model, prompt []int32, g gen, c slots.Constraint, emit func(piece) error) (outcome, *apiError) {
	st, err := m.Sched.Submit(ctx, slots.Request{
		Prompt: prompt, Params: g.params, Presence: g.presence, Frequency: g.frequency,
		MaxTokens: g.maxTokens, End: m.isEnd, Constraint: c, Ban: g.ban, Bias: g.bias, Logprobs: g.logprobs, TopLogprobs: g.top,
		Own: g.own,
	})
	if err != nil {
		return outcome{}, submitError(err)
	}
	dec := m.Tok.NewStreamDecoder()
	stops := stopMatcher{stops: g.stops}
	var o outcome
	hit := false
	for {
		toks, done := st.Next()
		if !hit && len(toks) > 0 {
			var text []byte
			for _, t := range toks {
				if m.isEnd(t.ID) {
					continue
				}
				out, matched := stops.feed(dec.Next(t.ID))
				text = append(text, out...)
				if matched {
					hit = true
					st.Cancel()
					break
				}
			}
			if err := emit(piece{text: string(text), toks: toks}); err != nil {
				st.Cancel()
				o.err = err
			}
		}
		if done {
			break
		}
	}
	o.res = st.Result()
	switch {
	case hit:
		o.finish, o.stop = "stop", stops.matched
	case o.res.Reason == "error":
		o.err = o.res.Err
	case o.res.Reason == "cancelled":
		if o.err == nil {
			o.err = context.Cause(ctx)
		}
		if o.err == nil {
			o.err = errors.New("cancelled")
		}
	default:
		o.finish = o.res.Reason
		out, _ := stops.feed(dec.Flush())
		if rest := out + stops.flush(); rest != "" {
			if err := emit(piece{text: rest}); err != nil {
				o.err = err
			}
		}
	}
	return o, nil
}

// runFailed answers a run that was refused (aerr) or failed (o.err) with
// an OpenAI error object and reports whether it did. A failure after the
// client went away is not answered or logged: nobody is listening.
func (s *Server) runFailed(w http.ResponseWriter, r *http.Request, o outcome, aerr *apiError) bool {
	if aerr != nil {
		aerr.write(w)
		return true
	}
	if o.err != nil {
		if r.Context().Err() == nil {
			s.opts.Log.Error("generation failed", "route", r.URL.Path, "err", o.err)
			fail(w, http.StatusInternalServerError, "server_error", "generation failed: "+o.err.Error(), "", "")
		}
		return true
	}
	return false
}

// streamFailed is runFailed for a stream already under way: the error goes
// out as one more event.
func (s *Server) streamFailed(sse *openai.SSE, r *http.Request, o outcome, aerr *apiError) bool {
	if aerr != nil {
		sse.Send(openai.ErrorResponse{Error: openai.ErrorBody{Message: aerr.msg, Type: aerr.typ}})
		return true
	}
	if o.err != nil {
		if r.Context().Err() == nil {
			s.opts.Log.Error("generation failed", "route", r.URL.Path, "err", o.err)
			sse.Send(openai.ErrorResponse{Error: openai.ErrorBody{Message: "generation failed: " + o.err.Error(), Type: "server_error"}})
		}
		return true
	}
	return false
}
