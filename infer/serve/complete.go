package serve

import (
	"fmt"
	"net/http"
	"time"

	"github.com/bonsai-chat/bonsai/infer/openai"
)

// completions is POST /v1/completions: the prompt as is, without the chat
// template (as `bonsai run --raw`).
func (s *Server) completions(w http.ResponseWriter, r *http.Request, m *Model) {
	var req openai.CompletionRequest
	if !s.decode(w, r, &req) {
		return
	}
	if len(req.Prompt) != 1 || req.Prompt[0] == "" {
		fail(w, http.StatusBadRequest, "invalid_request_error", "prompt must be one non-empty string", "prompt", "")
		return
	}
	if req.Echo {
		fail(w, http.StatusBadRequest, "invalid_request_error", "echo is not supported", "echo", "")
		return
	}
	g, aerr := settings(m, knobs{
		maxTokens: req.MaxTokens, temperature: req.Temperature, topP: req.TopP, minP: req.MinP, topK: req.TopK,
		repeatLastN: req.RepeatLastN, seed: req.Seed, stop: req.Stop, presence: req.PresencePenalty,
		frequency: req.FrequencyPenalty, repeatP: req.RepeatPenalty, n: req.N,
	})
	if aerr != nil {
		aerr.write(w)
		return
	}
	if req.MaxTokens == nil {
		g.maxTokens = 16 // OpenAI's default for completions
	}
	if lp := req.Logprobs; lp != nil {
		if *lp < 0 || *lp > maxTopLogprobs {
			fail(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("logprobs must be between 0 and %d", maxTopLogprobs), "logprobs", "")
			return
		}
		g.logprobs, g.top = true, *lp
	}
	if req.IgnoreEOS {
		g.ban = m.endIDs
	}
	if n := len(req.Prompt[0]) / m.maxPiece; n >= m.Sched.Context() {
		tooLong(n, m).write(w)
		return
	}
	release, aerr := s.tokenizing(r.Context())
	if aerr != nil {
		aerr.write(w)
		return
	}
	prompt := m.Tok.Encode(req.Prompt[0], true)
	release()
	if m.Tok.AddBOS() && m.Tok.BOS() >= 0 {
		prompt = append([]int32{m.Tok.BOS()}, prompt...)
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	resp := func(text string, finish *string, lp *openai.CompletionLogprobs) openai.CompletionResponse {
		return openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: m.ID,
			Choices: []openai.CompletionChoice{{Text: text, FinishReason: finish, Logprobs: lp}}}
	}
	var all openai.CompletionLogprobs
	offset := 0
	logprobs := func(p piece) *openai.CompletionLogprobs {
		if !g.logprobs {
			return nil
		}
		var lp openai.CompletionLogprobs
		for _, e := range m.logprobs(p.toks) {
			lp.Tokens = append(lp.Tokens, e.Token)
			lp.TokenLogprobs = append(lp.TokenLogprobs, e.Logprob)
			top := map[string]float32{}
			for _, a := range e.TopLogprobs {
				top[a.Token] = a.Logprob
			}
			lp.TopLogprobs = append(lp.TopLogprobs, top)
			lp.TextOffset = append(lp.TextOffset, offset)
			offset += len(e.Token)
		}
		return &lp
	}
	if req.Stream {
		sse := openai.NewSSE(w)
		o, aerr := run(r.Context(), m, prompt, g, nil, func(p piece) error {
			lp := logprobs(p)
			if p.text == "" && lp == nil {
				return nil
			}
			return sse.Send(resp(p.text, nil, lp))
		})
		if s.streamFailed(sse, r, o, aerr) {
			return
		}
		fin := resp("", &o.finish, nil)
		fin.Timings = timingsOf(o.res)
		if sse.Send(fin) != nil {
			return
		}
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			u := resp("", nil, nil)
			u.Choices, u.Usage = []openai.CompletionChoice{}, usageOf(o.res)
			if sse.Send(u) != nil {
				return
			}
		}
		sse.Done()
		return
	}
	var text []byte
	o, aerr := run(r.Context(), m, prompt, g, nil, func(p piece) error {
		text = append(text, p.text...)
		if lp := logprobs(p); lp != nil {
			all.Tokens = append(all.Tokens, lp.Tokens...)
			all.TokenLogprobs = append(all.TokenLogprobs, lp.TokenLogprobs...)
			all.TopLogprobs = append(all.TopLogprobs, lp.TopLogprobs...)
			all.TextOffset = append(all.TextOffset, lp.TextOffset...)
		}
		return nil
	})
	if s.runFailed(w, r, o, aerr) {
		return
	}
	var lp *openai.CompletionLogprobs
	if g.logprobs {
		lp = &all
	}
	out := resp(string(text), &o.finish, lp)
	out.Usage, out.Timings = usageOf(o.res), timingsOf(o.res)
	writeJSON(w, http.StatusOK, out)
}
