package infer

import (
	"fmt"
	"slices"
)

// Sequence is one conversation's tokens in a model's KV cache. It knows
// which tokens the cache holds, so a new prompt that starts with them only
// runs what is new.
type Sequence struct {
	m      *Model
	tokens []int32 // what the KV cache holds, position by position

	// Speculation (verify.go): the length Rewind may go back to and a
	// recurrent model's state there.
	markPos   int
	markState []float32
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

// Hold makes the sequence hold tokens, which the model's cache holds from
// position 0 and, on a recurrent network, its state follows as Forward
// left it: another owner of the model ran them (a scheduler's one slot,
// infer/slots), and what the sequence caches next builds on them.
func (s *Sequence) Hold(tokens []int32) error {
	if len(tokens) > s.m.Context() {
		return fmt.Errorf("%w: %d tokens, the context %d", ErrContextFull, len(tokens), s.m.Context())
	}
	s.tokens = append(s.tokens[:0], tokens...)
	s.markPos, s.markState = 0, nil
	return nil
}

// Reset forgets the cache's contents (and a recurrent model's snapshots,
// which belong to them).
func (s *Sequence) Reset() {
	s.tokens = s.tokens[:0]
	s.markPos = 0
	s.m.Drop()
}

// SetModel moves the sequence to another model (a backend switch); the new
// model's cache is empty.
func (s *Sequence) SetModel(m *Model) {
	s.m = m
	s.tokens = s.tokens[:0]
	s.markPos, s.markState = 0, nil
}

// Reuse says what a prefill kept of the cache.
type Reuse struct {
	// Shared is how many tokens at the prompt's start the cache held
	// (never the prompt's last token, whose logits are needed).
	Shared int
	// Kept is how many of them were not run again: Shared, or on a
	// recurrent model the latest position ≤ Shared its state could resume
	// from (its state then, or a snapshot), 0 when there was none.
	Kept int
}

// Plan says what a prefill of prompt would keep of the cache, without
// running anything.
func (s *Sequence) Plan(prompt []int32) Reuse {
	var r Reuse
	for r.Shared < len(s.tokens) && r.Shared < len(prompt)-1 && s.tokens[r.Shared] == prompt[r.Shared] {
		r.Shared++
	}
	r.Kept = s.m.ResumePoint(r.Shared)
	return r
}

// Prefill makes the cache hold exactly prompt and leaves the logits of its
// last token in Model().Logits(). It reuses the longest cached prefix (but
// always runs the last token, whose logits are needed) and returns how many
// tokens it reused. progress, if set, is called after each batch with the
// tokens run so far and in all; returning false stops the prefill there
// with ErrInterrupted (the cache then holds the batches that ran).
func (s *Sequence) Prefill(prompt []int32, progress func(done, total int) bool) (reused int, err error) {
	r, err := s.PrefillMarked(prompt, nil, progress)
	return r.Kept, err
}

// PrefillMarked is Prefill that also snapshots a recurrent model's state
// (Model.Checkpoint) at each of marks, positions in prompt such as the
// turn boundaries of a chat, that the prefill reaches, so that a later
// prompt sharing the prompt's tokens up to a mark (a regenerated or edited
// turn) resumes there instead of at 0. Batches are split at the marks. On a
// network without recurrent layers marks change nothing.
func (s *Sequence) PrefillMarked(prompt []int32, marks []int, progress func(done, total int) bool) (Reuse, error) {
	if len(prompt) == 0 {
		return Reuse{}, fmt.Errorf("%w: empty prompt", ErrBadShape)
	}
	if len(prompt) > s.m.Context() {
		return Reuse{}, fmt.Errorf("%w: the prompt has %d tokens, the context %d", ErrContextFull, len(prompt), s.m.Context())
	}
	r := s.Plan(prompt)
	s.tokens = s.tokens[:r.Kept]
	if s.markPos > r.Kept {
		s.markPos = 0 // the mark's tokens are gone; Rewind starts over
	}
	if !s.m.Recurrent() {
		marks = nil
	}
	if slices.Contains(marks, r.Kept) && s.m.StatePos() == r.Kept {
		if err := s.m.Checkpoint(); err != nil {
			return r, err
		}
	}
	rest := prompt[r.Kept:]
	for start := 0; start < len(rest); {
		end := min(start+s.m.MaxBatch(), len(rest))
		for _, mk := range marks {
			if at := mk - r.Kept; at > start && at < end {
				end = at
			}
		}
		if err := s.m.Forward(rest[start:end], r.Kept+start); err != nil {
			return r, err
		}
		s.tokens = append(s.tokens, rest[start:end]...)
		if slices.Contains(marks, r.Kept+end) {
			if err := s.m.Checkpoint(); err != nil {
				return r, err
			}
		}
		if progress != nil && !progress(end, len(rest)) && end < len(rest) {
			return r, fmt.Errorf("%w after %d of %d prompt tokens", ErrInterrupted, r.Kept+end, len(prompt))
		}
		start = end
	}
	return r, nil
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
