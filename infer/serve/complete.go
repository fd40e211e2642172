package serve

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/bonsai-chat/bonsai/infer/grammar"
	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// maxCompletionChoices bounds the choices of /v1/completions: n for each
// prompt of the prompt array.
const maxCompletionChoices = 16

// completions is POST /v1/completions: the prompt as is, without the chat
// template (as `bonsai run --raw`). A prompt array or n > 1 makes several
// choices (n for each prompt, in that order), generated side by side.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, m *Model) {
	var req openai.CompletionRequest
	if !s.decode(w, r, &req) {
		return
	}
	if len(req.Prompt) == 0 {
		fail(w, http.StatusBadRequest, "invalid_request_error", "prompt must be a non-empty string, an array of them, or token ids", "prompt", "")
		return
	}
	g, aerr := settings(m, knobs{
		maxTokens: req.MaxTokens, temperature: req.Temperature, topP: req.TopP, minP: req.MinP, topK: req.TopK,
		repeatLastN: req.RepeatLastN, seed: req.Seed, stop: req.Stop, presence: req.PresencePenalty,
		frequency: req.FrequencyPenalty, repeatP: req.RepeatPenalty, n: req.N, logitBias: req.LogitBias,
	})
	if aerr != nil {
		aerr.write(w)
		return
	}
	if n := len(req.Prompt) * g.n; n > maxCompletionChoices {
		fail(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("%d prompts × n %d make %d choices, at most %d", len(req.Prompt), g.n, n, maxCompletionChoices), "prompt", "")
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
	if req.Echo && g.logprobs {
		fail(w, http.StatusBadRequest, "invalid_request_error", "echo with logprobs is not supported: the prompt's log-probabilities are not computed", "echo", "")
		return
	}
	if req.IgnoreEOS {
		g.ban = m.endIDs
	}
	sch, aerr := requestSchema(req.ResponseFormat, req.JSONSchema, req.Grammar)
	if aerr != nil {
		aerr.write(w)
		return
	}
	prompts := make([][]int32, len(req.Prompt))
	echoes := make([]string, len(req.Prompt))
	for i, p := range req.Prompt {
		param := fmt.Sprintf("prompt[%d]", i)
		switch {
		case p.Tokens != nil:
			if len(p.Tokens) == 0 {
				fail(w, http.StatusBadRequest, "invalid_request_error", "a token prompt must not be empty", param, "")
				return
			}
			if len(p.Tokens) >= m.Sched.Context() {
				tooLong(len(p.Tokens), m).write(w)
				return
			}
			for _, id := range p.Tokens {
				if id < 0 || int(id) >= m.Tok.Vocab() {
					fail(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("token %d is not in the vocabulary of %d", id, m.Tok.Vocab()), param, "")
					return
				}
			}
			prompts[i] = p.Tokens
			if req.Echo {
				echoes[i] = m.Tok.Decode(p.Tokens)
			}
		case p.Text == "":
			fail(w, http.StatusBadRequest, "invalid_request_error", "a prompt must not be empty", param, "")
			return
		default:
			if n := len(p.Text) / m.maxPiece; n >= m.Sched.Context() {
				tooLong(n, m).write(w)
				return
			}
			release, aerr := s.tokenizing(r.Context())
			if aerr != nil {
				aerr.write(w)
				return
			}
			prompt := m.Tok.Encode(p.Text, true)
			release()
			if m.Tok.AddBOS() && m.Tok.BOS() >= 0 {
				prompt = append([]int32{m.Tok.BOS()}, prompt...)
			}
			prompts[i] = prompt
			if req.Echo {
				echoes[i] = p.Text
			}
		}
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	resp := func(i int, text string, finish *string, lp *openai.CompletionLogprobs) openai.CompletionResponse {
		return openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: m.ID,
			Choices: []openai.CompletionChoice{{Index: i, Text: text, FinishReason: finish, Logprobs: lp}}}
	}
	logprobs := func(p piece, offset *int) *openai.CompletionLogprobs {
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
			lp.TextOffset = append(lp.TextOffset, *offset)
			*offset += len(e.Token)
		}
		return &lp
	}
	choices := len(prompts) * g.n
	outcomes := make([]outcome, choices)
	aerrs := make([]*apiError, choices)
	// each runs choice i: prompt i/n with the seed moved by i%n.
	each := func(body func(i int, prompt []int32, g gen, c *grammar.Constraint)) {
		var wg sync.WaitGroup
		for i := range choices {
			wg.Go(func() {
				cg := g
				cg.params.Seed += uint64(i % g.n)
				var c *grammar.Constraint
				if sch != nil {
					c = grammar.NewConstraint(m.grammarVocab(), grammar.NewMachine(sch))
				}
				body(i, prompts[i/g.n], cg, c)
			})
		}
		wg.Wait()
	}
	if req.Stream {
		sse := &lockedSSE{sse: openai.NewSSE(w)}
		each(func(i int, prompt []int32, g gen, c *grammar.Constraint) {
			offset := 0
			if echo := echoes[i/g.n]; echo != "" {
				if err := sse.Send(resp(i, echo, nil, nil)); err != nil {
					outcomes[i].err = err
					return
				}
			}
			o, aerr := run(r.Context(), m, prompt, g, constraintOrNil(c), func(p piece) error {
				lp := logprobs(p, &offset)
				if p.text == "" && lp == nil {
					return nil
				}
				return sse.Send(resp(i, p.text, nil, lp))
			})
			outcomes[i], aerrs[i] = o, aerr
			if aerr != nil || o.err != nil {
				return
			}
			fin := resp(i, "", &o.finish, nil)
			fin.Timings = timingsOf(o.res)
			outcomes[i].err = sse.Send(fin)
		})
		for i := range outcomes {
			if s.streamFailed(sse.sse, r, outcomes[i], aerrs[i]) {
				return
			}
		}
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			u := resp(0, "", nil, nil)
			u.Choices, u.Usage = []openai.CompletionChoice{}, completionUsage(outcomes, g.n)
			if sse.Send(u) != nil {
				return
			}
		}
		sse.sse.Done()
		return
	}
	out := openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: m.ID,
		Choices: make([]openai.CompletionChoice, choices)}
	each(func(i int, prompt []int32, g gen, c *grammar.Constraint) {
		text := []byte(echoes[i/g.n])
		var all openai.CompletionLogprobs
		offset := 0
		o, aerr := run(r.Context(), m, prompt, g, constraintOrNil(c), func(p piece) error {
			text = append(text, p.text...)
			if lp := logprobs(p, &offset); lp != nil {
				all.Tokens = append(all.Tokens, lp.Tokens...)
				all.TokenLogprobs = append(all.TokenLogprobs, lp.TokenLogprobs...)
				all.TopLogprobs = append(all.TopLogprobs, lp.TopLogprobs...)
				all.TextOffset = append(all.TextOffset, lp.TextOffset...)
			}
			return nil
		})
		outcomes[i], aerrs[i] = o, aerr
		finish := o.finish
		out.Choices[i] = openai.CompletionChoice{Index: i, Text: string(text), FinishReason: &finish}
		if g.logprobs {
			out.Choices[i].Logprobs = &all
		}
	})
	for i := range outcomes {
		if s.runFailed(w, r, outcomes[i], aerrs[i]) {
			return
		}
	}
	out.Usage, out.Timings = completionUsage(outcomes, g.n), timingsOf(outcomes[0].res)
	writeJSON(w, http.StatusOK, out)
}

// completionUsage counts each prompt once and every completion.
func completionUsage(os []outcome, n int) *openai.Usage {
	if len(os) == 1 {
		return usageOf(os[0].res)
	}
	u := &openai.Usage{}
	for i, o := range os {
		if i%n == 0 {
			u.PromptTokens += o.res.PromptTokens
		}
		u.CompletionTokens += o.res.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// constraintOrNil is c as the scheduler's Constraint: nil when there is
// none (a nil *Constraint in the interface would not be).
func constraintOrNil(c *grammar.Constraint) slots.Constraint {
	if c == nil {
		return nil
	}
	return c
}
