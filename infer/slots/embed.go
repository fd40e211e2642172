package slots

import (
	"context"
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
)

// embedding is an Embed job: the tokens, and their pooled hidden state
// once run.
type embedding struct {
	tokens []int32
	vec    []float32
}

// Embed runs tokens through the model as a sequence of their own, in a free
// slot between the steps of the generations, and returns the mean of their
// final-norm hidden states (llama.cpp's mean pooling): Embed values, not
// normalised. It waits for a slot as Submit's requests do, and its passes
// hold the other slots' next tokens back for as long as they take (a
// prefill of the same tokens would, in smaller pieces). The slot's cache
// keeps the tokens, as after a prompt.
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
	s.queue = append(s.queue, &job{req: Request{Prompt: tokens}, st: st, embed: e})
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

// runEmbed runs an Embed job in the free slot sl, pass by pass.
func (s *Scheduler) runEmbed(sl *slot, j *job) {
	e, m := j.embed, s.m
	E, B := m.Hparams.Embed, m.MaxBatch()
	if n := min(len(e.tokens), B) * E; len(s.hidden) < n {
		s.hidden = make([]float32, n)
	}
	sum := make([]float64, E)
	sl.tokens, sl.own = sl.tokens[:0], 0
	finish := func(reason string, err error) {
		s.mu.Lock()
		s.stats.Requests++
		s.stats.PromptTokens += int64(len(sl.tokens))
		s.stats.Busy = s.busy()
		s.mu.Unlock()
		j.st.finish(Result{Reason: reason, Err: err, PromptTokens: len(e.tokens), Slot: sl.index})
	}
	for start := 0; start < len(e.tokens); start += B {
		if j.st.ctx.Err() != nil {
			finish("cancelled", nil)
			return
		}
		chunk := e.tokens[start:min(start+B, len(e.tokens))]
		if err := m.Hidden(chunk, start, sl.base, s.hidden); err != nil {
			sl.tokens = sl.tokens[:0] // what the failed pass left is unknown
			if !s.batched {
				m.Drop()
			}
			finish("error", err)
			return
		}
		for i := range chunk {
			for c, v := range s.hidden[i*E : (i+1)*E] {
				sum[c] += float64(v)
			}
		}
		sl.tokens = append(sl.tokens, chunk...)
	}
	e.vec = make([]float32, E)
	for c, v := range sum {
		e.vec[c] = float32(v / float64(len(e.tokens)))
	}
	finish("stop", nil)
}
