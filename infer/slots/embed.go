package slots

import (
	"context"
	"fmt"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
)

// embedding is an Embed job: the tokens, and their pooled hidden state
// once run.
type embedding struct {
	tokens []int32
	sum    []float64 // of the hidden rows run so far
	vec    []float32
}

// Embed runs tokens through the model as a sequence of their own, in a free
// slot between the steps of the generations, and returns the mean of their
// final-norm hidden states (llama.cpp's mean pooling): Embed values, not
// normalised. It waits for a slot as Submit's requests do; its tokens run a
// pass at a time between the generations' steps, in chunks no longer than
// a prompt's beside decoding streams. The slot's cache keeps the tokens, as
// after a prompt.
func (s *Scheduler) Embed(ctx context.Context, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens to embed", infer.ErrBadShape)
	}
	if len(tokens) > s.slotCtx {
		return nil, fmt.Errorf("%w: %d tokens to embed, a slot holds %d", ErrPromptTooLong, len(tokens), s.slotCtx)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= s.vocab {
			return nil, fmt.Errorf("%w: token id %d outside the vocabulary of %d", infer.ErrBadShape, id, s.vocab)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	st := &Stream{ctx: cctx, cancel: cancel, notify: make(chan struct{}, 1)}
	e := &embedding{tokens: tokens}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	s.queue = append(s.queue, &job{req: Request{Prompt: tokens}, st: st, embed: e, submitted: time.Now()})
	s.stats.Queued = len(s.queue)
	s.mu.Unlock()
	s.poke()
	for {
		if _, done := st.Next(); done {
			break
		}
	}
	switch r := st.Result(); r.Reason {
	case "stop":
		return e.vec, nil
	case "cancelled":
		return nil, context.Cause(ctx)
	default:
		return nil, r.Err
	}
}

// startEmbed gives the free slot sl to an Embed job: its tokens run a
// pass at a time (embedStep), beside the generations' steps.
func (s *Scheduler) startEmbed(sl *slot, j *job) {
	*sl = slot{index: sl.index, base: sl.base, tokens: sl.tokens[:0], job: j, prompt: j.embed.tokens, started: time.Now()}
	j.embed.sum = make([]float64, s.m.Hparams.Embed)
}

// generating counts the slots busy with generations.
func (s *Scheduler) generating() int {
	n := 0
	for _, sl := range s.slots {
		if sl.job != nil && sl.job.embed == nil && !sl.waiting() {
			n++
		}
	}
	return n
}

// embedStep runs the next pass of each Embed job: as many tokens as a
// prompt's chunk takes, fewer while generations are decoding (their next
// tokens wait for it, as for a prefill's).
func (s *Scheduler) embedStep() {
	m, E := s.m, s.m.Hparams.Embed
	B := m.MaxBatch()
	if s.generating() > 0 {
		B = min(B, prefillWhileDecoding)
	}
	for _, sl := range s.slots {
		j := sl.job
		if j == nil || j.embed == nil {
			continue
		}
		e := j.embed
		chunk := e.tokens[sl.done:min(sl.done+B, len(e.tokens))]
		if n := len(chunk) * E; len(s.hidden) < n {
			s.hidden = make([]float32, n)
		}
		t0 := time.Now()
		if err := m.Hidden(chunk, sl.done, sl.base, sl.index, s.hidden); err != nil {
			sl.tokens = sl.tokens[:0] // what the failed pass left is unknown
			if !s.batched {
				m.Drop()
			}
			s.finish(sl, "error", err)
			continue
		}
		took := time.Since(t0).Seconds()
		for i := range chunk {
			for c, v := range s.hidden[i*E : (i+1)*E] {
				e.sum[c] += float64(v)
			}
		}
		sl.tokens = append(sl.tokens, chunk...)
		sl.done += len(chunk)
		s.mu.Lock()
		s.stats.Passes++
		s.stats.PromptTokens += int64(len(chunk))
		s.stats.PromptSeconds += took
		s.mu.Unlock()
		if sl.done == len(e.tokens) {
			e.vec = make([]float32, E)
			for c, v := range e.sum {
				e.vec[c] = float32(v / float64(len(e.tokens)))
			}
			s.finish(sl, "stop", nil)
		}
	}
}

// finish ends the slot's job: a generation (end), or an Embed job.
func (s *Scheduler) finish(sl *slot, reason string, err error) {
	j := sl.job
	if j.embed == nil {
		s.end(sl, reason, err)
		return
	}
	sl.job, sl.prompt = nil, nil
	s.mu.Lock()
	s.stats.Requests++
	s.stats.Busy = s.busy()
	s.mu.Unlock()
	j.st.finish(Result{Reason: reason, Err: err, PromptTokens: len(j.embed.tokens), Queued: sl.started.Sub(j.submitted), Slot: sl.index})
}
