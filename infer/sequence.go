package infer

import "fmt"

// Sequence is one conversation's tokens in a model's KV cache. It knows
// which tokens the cache holds, so a new prompt that starts with them only
// runs what is new.
type Sequence struct {
	m      *Model
	tokens []int32 // what the KV cache holds, position by position
}

// NewSequence starts an empty sequence on m.
func NewSequence(m *Model) *Sequence {
	return &Sequence{m: m, tokens: make([]int32, 0, m.Context())}
}

// Model is the model the sequence runs on.
func (s *Sequence) Model() *Model { return s.m }

// Len is the number of tokens in the cache.
func (s *Sequence) Len() int { return len(s.tokens) }

// Tokens are the cached tokens; the slice is the sequence's own.
func (s *Sequence) Tokens() []int32 { return s.tokens }

// Reset forgets the cache's contents.
func (s *Sequence) Reset() { s.tokens = s.tokens[:0] }

// SetModel moves the sequence to another model (a backend switch); the new
// model's cache is empty.
func (s *Sequence) SetModel(m *Model) {
	s.m = m
	s.tokens = s.tokens[:0]
}

// Prefill makes the cache hold exactly prompt and leaves the logits of its
// last token in Model().Logits(). It reuses the longest cached prefix (but
// always runs the last token, whose logits are needed) and returns how many
// tokens it reused. progress, if set, is called after each batch with the
// tokens run so far and in all; returning false stops the prefill there
// with ErrInterrupted (the cache then holds the batches that ran).
func (s *Sequence) Prefill(prompt []int32, progress func(done, total int) bool) (reused int, err error) {
	if len(prompt) == 0 {
		return 0, fmt.Errorf("%w: empty prompt", ErrBadShape)
	}
	if len(prompt) > s.m.Context() {
		return 0, fmt.Errorf("%w: the prompt has %d tokens, the context %d", ErrContextFull, len(prompt), s.m.Context())
	}
	for reused < len(s.tokens) && reused < len(prompt)-1 && s.tokens[reused] == prompt[reused] {
		reused++
	}
	s.tokens = s.tokens[:reused]
	rest := prompt[reused:]
	for start := 0; start < len(rest); start += s.m.MaxBatch() {
		end := min(start+s.m.MaxBatch(), len(rest))
		if err := s.m.Forward(rest[start:end], reused+start); err != nil {
			return reused, err
		}
		s.tokens = append(s.tokens, rest[start:end]...)
		if progress != nil && !progress(end, len(rest)) && end < len(rest) {
			return reused, fmt.Errorf("%w after %d of %d prompt tokens", ErrInterrupted, reused+end, len(prompt))
		}
	}
	return reused, nil
}

// Append runs one more token (the one just sampled) and leaves the next
// logits in Model().Logits(). It fails with ErrContextFull when the cache is
// full.
func (s *Sequence) Append(tok int32) error {
	if err := s.m.Forward([]int32{tok}, len(s.tokens)); err != nil {
		return err
	}
	s.tokens = append(s.tokens, tok)
	return nil
}

// Greedy runs prompt from position 0 and then n greedy steps (argmax, the
// first on ties, as llama.cpp's greedy sampler), returning the n tokens:
// the reference continuation parity tests compare.
func (m *Model) Greedy(prompt []int32, n int) ([]int32, error) {
	s := NewSequence(m)
	if _, err := s.Prefill(prompt, nil); err != nil {
		return nil, err
	}
	out := make([]int32, 0, n)
	for len(out) < n {
		best := 0
		for i, l := range m.logits {
			if l > m.logits[best] {
				best = i
			}
		}
		out = append(out, int32(best))
		if len(out) == n {
			break
		}
		if err := s.Append(int32(best)); err != nil {
			return out, err
		}
	}
	return out, nil
}
