package slots

import (
	"fmt"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// Speculation in a batched pass. A decoding slot's drafts are extra rows
// of the pass that runs its next token; sampling then goes row by row as
// plain decoding would, and a row is used only while the token sampled
// before it is the draft it ran, so the output is plain decoding's.
//
// Whether drafting pays is a question about the whole pass. A pass of R
// rows costs about a + c·R (a: what every pass pays, the weights read once
// on a CPU; c: each row's arithmetic). With n slots decoding, plain passes
// give n tokens per a + c·n; adding D draft rows of which A are confirmed
// gives n + A per a + c·(n + D), which is more exactly when
//
//	A/D > n·c / (a + c·n)
//
// so a slot's drafts pay while its share of confirmed drafts stays above
// that threshold, measured on the passes this scheduler runs
// (spec.PassCost.Gain). The draft length and the verdict are spec.Control's,
// the one controller the chat's decoder uses too.
//
// A drafter that proposes tokens for sure (prompt lookup) is verified as
// point masses: the token sampled from a row is plain decoding's draw, and
// a draft is confirmed when it is that token, so the output is plain
// decoding's. A draft model's tokens come with the distributions they were
// drawn from, and a sampled request decides them by rejection sampling
// (spec.Rejection), which accepts more of them and keeps the target's
// distribution (not its draws). Their time counts against their gain
// (spec.PassCost.GainTimed): a draft model's passes are not free.
//
// A recurrent state cannot be truncated: where one slot runs through
// Forward, its drafts are verified on an infer.Sequence (Verify keeps the
// state before the pass on the host, Rewind puts it back and runs the
// confirmed tokens again), and the rewind's time counts against the gain
// too. Passes over rows keep one state per slot on the device, which no
// rewind reaches: there a recurrent model does not draft.

// draftFor is what sl drafts this pass: up to its draft length of the
// drafter's proposal, within room rows, the slot's context and the
// request's token limit.
func (s *Scheduler) draftFor(sl *slot, room int) ([]int32, error) {
	sl.dists, sl.draftTime = nil, 0
	drafter := s.drafterFor(sl)
	if drafter == nil {
		return nil, nil
	}
	held := sl.tokens[:sl.held()] // a chained pass in flight runs next
	k := sl.draft.Len()
	k = min(k, room, s.slotCtx-len(held)-2) // next and the drafts must fit
	if r := sl.job.req; r.MaxTokens > 0 {
		k = min(k, r.MaxTokens-sl.generated-1)
	}
	if k <= 0 {
		sl.draft.Plain()
		return nil, nil
	}
	ctx := append(append(sl.lookupCtx[:0], held...), sl.next)
	sl.lookupCtx = ctx
	t0 := time.Now()
	drafts, dists, err := drafter.Draft(ctx, k)
	sl.draftTime = time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("drafting: %w", err)
	}
	drafts = drafts[:min(len(drafts), k)]
	if len(drafts) == 0 {
		sl.draft.Plain()
	}
	// The drafter's slices are its own until its next call, which may be
	// another slot's.
	sl.dists = nil
	if dists != nil && !sl.sampler.Params().Argmax() && sl.job.req.Constraint == nil {
		for i := range drafts {
			if i == len(sl.distBuf) {
				sl.distBuf = append(sl.distBuf, nil)
			}
			sl.distBuf[i] = append(sl.distBuf[i][:0], dists[i]...)
		}
		sl.dists = sl.distBuf[:len(drafts)]
	}
	sl.draftBuf = append(sl.draftBuf[:0], drafts...)
	return sl.draftBuf, nil
}

// drafterFor is the drafter of sl's request: its own, else the
// scheduler's; nil where the model cannot verify drafts here.
func (s *Scheduler) drafterFor(sl *slot) spec.Drafter {
	if !s.canDraft {
		return nil
	}
	if d := sl.job.req.Drafter; d != nil {
		return d
	}
	return s.drafter
}

// verifyRecurrent runs the one slot's next token and drafts (s.toks) on a
// recurrent model, keeping the state before them for rewind.
func (s *Scheduler) verifyRecurrent(sl *slot) error {
	if sl.verify == nil {
		sl.verify = infer.NewSequence(s.m)
	}
	seq := sl.verify
	// A chained pass stopped in flight leaves the state a token on, taken
	// back here (infer.ChainedRecurrent).
	if err := s.m.Restore(len(sl.tokens)); err != nil {
		return err
	}
	if err := seq.Hold(sl.tokens); err != nil {
		return err
	}
	rows, err := seq.Verify(s.toks)
	if err != nil {
		return err
	}
	copy(s.logits, rows)
	sl.verified = true
	return nil
}

// rewind takes a verified slot's recurrent state back to its tokens: the
// confirmed ones, which the pass's sampling appended.
func (s *Scheduler) rewind(sl *slot) {
	sl.verified = false
	if err := sl.verify.Rewind(len(sl.tokens)); err != nil {
		sl.tokens = sl.tokens[:0] // the state belongs to none of them
		s.m.Drop()
		if sl.job != nil {
			s.end(sl, "error", err)
		}
	}
}
