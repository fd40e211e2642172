package spec

// Control adapts the draft length and decides when drafting pays. It is
// the one controller of speculation: the scheduler (infer/slots) asks it
// how much each sequence drafts and tells it how each verify went.
//
// The length doubles while whole drafts are accepted (up to the longest),
// and after a partial acceptance becomes one more than what was accepted
// (at least two). Whether drafting pays is the verify pass's gain, which
// the caller measures: the tokens the pass produced against what plain
// passes would have produced in its time (PassCost.Gain). A verify costs
// more than a plain pass (on the CPU the output head's product grows with
// its rows), so a draft pays only when enough of it is accepted. While the gain stays below one, drafting
// stops for a while (8 plain passes, doubling to 256 while drafts keep not
// paying), then tries again: what a reply quotes changes as it goes.
type Control struct {
	k, maxK int
	gain    float64 // EMA of the verify passes' gains; 0: none yet
	pause   int     // plain passes to take before drafting again
	backoff int
	samples int // gains measured since drafting last resumed
}

const (
	emaWeight  = 0.3
	minBackoff = 8
	maxBackoff = 256
)

// NewControl drafts at most maxK tokens per pass (0: never).
func NewControl(maxK int) Control {
	return Control{k: min(2, max(maxK, 0)), maxK: max(maxK, 0), backoff: minBackoff}
}

// Len is how many tokens to draft for the next pass; 0 means a plain one.
func (c *Control) Len() int {
	if c.maxK == 0 || c.pause > 0 {
		return 0
	}
	return c.k
}

// Plain records a pass that verified no draft.
func (c *Control) Plain() {
	if c.pause > 0 {
		c.pause--
	}
}

func ema(old, x float64) float64 {
	if old == 0 {
		return x
	}
	return old + emaWeight*(x-old)
}

// Verified records a verify pass of drafted tokens of which accepted were,
// and its gain (above one: the pass beat plain decoding); a gain ≤ 0 is
// not measured: the length adapts, the verdict waits.
func (c *Control) Verified(drafted, accepted int, gain float64) {
	if accepted == drafted {
		c.k = min(2*c.k, c.maxK)
	} else {
		c.k = min(max(accepted+1, 2), c.maxK)
	}
	if gain <= 0 {
		return
	}
	c.gain = ema(c.gain, gain)
	c.samples++
	// One slow pass (a page fault, another process) is not a verdict: it
	// takes two, unless the pass lost more than half.
	switch {
	case c.gain < 1 && (c.samples >= 2 || c.gain < 0.5):
		c.samples = 0
		c.pause = c.backoff
		c.backoff = min(2*c.backoff, maxBackoff)
		c.gain = 0 // the next probe starts afresh
	case c.gain >= 1:
		c.backoff = minBackoff
	}
}

// PassCost fits a pass's time as a + c·rows over the recent passes
// (exponentially weighted least squares): a is what every pass pays (the
// weights read once, on a CPU), c each row's arithmetic.
type PassCost struct {
	w, x, y, xx, xy float64
}

// costDecay weighs the passes: about the last 50 count.
const costDecay = 0.98

// Add records a pass of rows that took seconds.
func (r *PassCost) Add(rows int, seconds float64) {
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

// rowShare is c/(a+c) as fitted, or the default while the passes have not
// varied enough to tell.
func (r *PassCost) rowShare() float64 {
	share := defaultRowShare
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
	return share
}

// Gain is what drafting gave a pass in which n sequences decode and one
// of them verified drafted tokens, accepted of them: n+accepted tokens in
// a + c·(n+drafted) against n in a + c·n. It is above one exactly when
// accepted/drafted > n·c/(a + c·n), the share of confirmed drafts that
// pays with n sequences decoding.
func (r *PassCost) Gain(n, drafted, accepted int) float64 {
	n = max(n, 1)
	s := r.rowShare() // with a + c = 1: a = 1 − s, c = s
	fn, fd := float64(n), float64(drafted)
	return (fn + float64(accepted)) * (1 - s + s*fn) / (fn * (1 - s + s*(fn+fd)))
}

// GainTimed is Gain where the drafts also took extra seconds to make
// outside the pass (a draft model's passes): n+accepted tokens in
// a + c·(n+drafted) + extra against n in a + c·n, a and c in seconds as
// the passes measured them. Before any pass is measured it is Gain.
func (r *PassCost) GainTimed(n, drafted, accepted int, extra float64) float64 {
	if r.w == 0 || extra <= 0 {
		return r.Gain(n, drafted, accepted)
	}
	n = max(n, 1)
	s := r.rowShare()
	// a + c in seconds: the mean pass, my = a + c·mx, with a = (1−s)(a+c)
	// and c = s(a+c).
	mx, my := r.x/r.w, r.y/r.w
	unit := my / (1 - s + s*mx)
	fn, fd := float64(n), float64(drafted)
	plain := unit * (1 - s + s*fn) / fn // seconds per token, plain
	return (fn + float64(accepted)) * plain / (unit*(1-s+s*(fn+fd)) + extra)
}
