package slots

import (
	"fmt"
	"time"
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

// draftFor is what sl drafts this pass: up to its draft length of the
// drafter's proposal, within room rows, the slot's context and the
// request's token limit.
func (s *Scheduler) draftFor(sl *slot, room int) ([]int32, error) {
	sl.dists, sl.draftTime = nil, 0
	if s.drafter == nil {
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
	drafts, dists, err := s.drafter.Draft(ctx, k)
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
