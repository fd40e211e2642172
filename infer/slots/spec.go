package slots

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
// so a slot drafts while its share of confirmed drafts stays above that
// threshold, measured on the passes this scheduler runs (rowCost). When it
// falls below, the slot stops drafting for a while (8 passes, doubling
// to 256 while drafts keep not paying), as the chat's decoder does.

// draftFor is what sl drafts this pass: up to its draft length of prompt
// lookup's proposal, within room rows, the slot's context and the
// request's token limit.
func (s *Scheduler) draftFor(sl *slot, room int) []int32 {
	if s.lookup == nil {
		return nil
	}
	k := sl.draft.length()
	k = min(k, room, s.slotCtx-len(sl.tokens)-2) // next and the drafts must fit
	if r := sl.job.req; r.MaxTokens > 0 {
		k = min(k, r.MaxTokens-sl.generated-1)
	}
	if k <= 0 {
		return nil
	}
	ctx := append(append(sl.lookupCtx[:0], sl.tokens...), sl.next)
	sl.lookupCtx = ctx
	return s.lookup.Draft(ctx, k)
}

// drafting is a slot's draft length and its verdict on whether drafts pay.
type drafting struct {
	k, maxK int
	rate    float64 // EMA of the confirmed share of drafts; −1: none yet
	passes  int     // verify passes since drafting (re)started
	pause   int     // passes to sit out
	backoff int
}

const (
	minDraftBackoff = 8
	maxDraftBackoff = 256
	draftEMA        = 0.3
)

func newDrafting(maxK int) drafting {
	return drafting{k: min(2, maxK), maxK: maxK, rate: -1, backoff: minDraftBackoff}
}

// length is the draft length for this pass; 0 while sitting out.
func (d *drafting) length() int {
	if d.pause > 0 {
		d.pause--
		return 0
	}
	return d.k
}

// verified records a verify of drafted tokens of which accepted were
// confirmed, threshold being the share that pays in the current batch.
func (d *drafting) verified(drafted, accepted int, threshold float64) {
	if accepted == drafted {
		d.k = min(2*d.k, d.maxK)
	} else {
		d.k = min(max(accepted+1, 2), d.maxK)
	}
	share := float64(accepted) / float64(drafted)
	if d.rate < 0 {
		d.rate = share
	} else {
		d.rate += draftEMA * (share - d.rate)
	}
	d.passes++
	switch {
	case d.passes >= 2 && d.rate < threshold:
		d.pause, d.backoff = d.backoff, min(2*d.backoff, maxDraftBackoff)
		d.passes, d.rate = 0, -1
	case d.rate >= threshold:
		d.backoff = minDraftBackoff
	}
}

// rowCost fits a pass's time as a + c·rows over the recent passes
// (exponentially weighted least squares).
type rowCost struct {
	w, x, y, xx, xy float64
}

// costDecay weighs the passes: about the last 50 count.
const costDecay = 0.98

func (r *rowCost) add(rows int, seconds float64) {
	x := float64(rows)
	r.w = costDecay*r.w + 1
	r.x = costDecay*r.x + x
	r.y = costDecay*r.y + seconds
	r.xx = costDecay*r.xx + x*x
	r.xy = costDecay*r.xy + x*seconds
}

// defaultRowShare is c/(a+c) until the passes tell: a row's arithmetic as
// a share of a one-row pass, a middle guess between a GPU (rows nearly
// free) and a CPU whose 1-bit products are bound by arithmetic.
const defaultRowShare = 0.6

// threshold is the share of confirmed drafts above which drafting pays
// with n slots decoding: n·c/(a + c·n).
func (r *rowCost) threshold(n int) float64 {
	n = max(n, 1)
	share := defaultRowShare // c/(a+c)
	if r.w > 4 {
		mx, my := r.x/r.w, r.y/r.w
		if v := r.xx/r.w - mx*mx; v > 0.25 { // the row counts varied enough to fit
			c := (r.xy/r.w - mx*my) / v
			a := my - c*mx
			if c > 0 && a+c > 0 {
				share = min(1, max(0, c/(a+c)))
			}
		}
	}
	// With a + c = 1: n·c/(a + c·n) = n·s/(1 − s + s·n), s = c/(a+c).
	fn := float64(n)
	return fn * share / (1 - share + share*fn)
}
