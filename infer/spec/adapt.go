package spec

import "time"

// controller adapts the draft length and decides when drafting pays. A
// verify pass of n tokens costs more than one plain step (on the CPU the
// output head's product grows with n), so a draft pays only when enough of
// it is accepted. The controller measures both: the plain step's time, and
// for each verify pass the tokens it produced against the plain steps they
// would have taken. While that gain stays below one it stops drafting for
// a while (doubling each time it is found not to pay), then tries again:
// what a reply quotes changes as it goes.
type controller struct {
	k, maxK int
	step    float64 // EMA of a plain step, seconds; 0: not measured yet
	gain    float64 // EMA of a pass's tokens × step / its time; 0: none yet
	pause   int     // plain steps to take before drafting again
	backoff int
	samples int // passes measured since drafting last resumed
}

const (
	emaWeight  = 0.3
	minBackoff = 8
	maxBackoff = 256
)

func newController(maxK int) controller {
	return controller{k: min(2, max(maxK, 0)), maxK: max(maxK, 0), backoff: minBackoff}
}

// draftLen is how many tokens to draft now; 0 means take a plain step.
func (c *controller) draftLen() int {
	if c.maxK == 0 || c.step == 0 || c.pause > 0 {
		return 0
	}
	return c.k
}

func ema(old, x float64) float64 {
	if old == 0 {
		return x
	}
	return old + emaWeight*(x-old)
}

// plainStep records a step that ran one token.
func (c *controller) plainStep(d time.Duration) {
	c.step = ema(c.step, d.Seconds())
	if c.pause > 0 {
		c.pause--
	}
}

// verified records a verify pass of drafted tokens of which accepted were.
func (c *controller) verified(drafted, accepted int, d time.Duration) {
	if accepted == drafted {
		c.k = min(2*c.k, c.maxK)
	} else {
		c.k = max(accepted+1, 2)
		c.k = min(c.k, c.maxK)
	}
	if d <= 0 || c.step == 0 {
		return
	}
	c.gain = ema(c.gain, float64(accepted+1)*c.step/d.Seconds())
	c.samples++
	// One slow pass (a page fault, another process) is not a verdict: it
	// takes two, unless the pass lost more than half.
	if c.gain < 1 && (c.samples >= 2 || c.gain < 0.5) {
		c.samples = 0
		c.pause = c.backoff
		c.backoff = min(2*c.backoff, maxBackoff)
		c.gain = 0 // the next probe starts afresh
	} else {
		c.backoff = minBackoff
	}
}
