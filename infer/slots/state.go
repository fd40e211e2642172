package slots

import (
	"fmt"
	"slices"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
)

// State runs fn on the scheduler's goroutine once the requests submitted
// before it are done, with a Sequence that holds what the one slot's cache
// holds: a one-sequence client saves its conversation's state there
// (infer.Sequence.WriteState), restores one (infer.SavedState.Restore) or
// forgets it (Reset). Afterwards the slot holds what the sequence holds,
// and the next request's prompt reuses it as it would the slot's own
// tokens. fn must not keep the sequence. It needs passes that run through
// Forward (Options.Forward, or a backend without passes over rows), where
// the model's state is the one slot's, else it fails with ErrNoState; it
// returns fn's error, or ErrClosed after Close.
func (s *Scheduler) State(fn func(seq *infer.Sequence) error) error {
	if s.batched {
		return ErrNoState
	}
	j := &job{state: fn, done: make(chan error, 1), submitted: time.Now()}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, j)
	s.mu.Unlock()
	s.poke()
	return <-j.done
}

// runState is a State call's work on sl, the one slot, free.
func (s *Scheduler) runState(sl *slot, j *job) {
	seq := infer.NewSequence(s.m)
	err := seq.Hold(sl.tokens)
	if err == nil {
		err = j.state(seq)
	}
	held := seq.Tokens()
	if len(held) > s.slotCtx {
		// Restored into a slot smaller than the model's context: its
		// tokens cannot all be the slot's.
		err = fmt.Errorf("%w: the state holds %d tokens, the slot %d", infer.ErrContextFull, len(held), s.slotCtx)
		seq.Reset()
		held = nil
	}
	if !slices.Equal(held, sl.tokens) {
		sl.own = 0 // whose conversation it is, the caller knows
	}
	sl.tokens = append(sl.tokens[:0], held...)
	j.done <- err
}
