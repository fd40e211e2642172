package spec

import (
	"fmt"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// Drafter proposes tokens to follow a context.
type Drafter interface {
	// Draft proposes up to k tokens to follow ctx (the whole sequence:
	// conversation and reply so far). dists is nil when each token is
	// proposed for sure (a point mass); else dists[i] is the distribution
	// token i was drawn from, for rejection sampling. The slices stay
	// valid until the next call.
	Draft(ctx []int32, k int) (tokens []int32, dists [][]sample.Prob, err error)
}

// lookup adapts Ngram to Drafter.
type lookup struct{ g *Ngram }

func (l lookup) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	return l.g.Draft(ctx, k), nil, nil
}

// LookupDrafter is prompt lookup as a Drafter.
func LookupDrafter(g *Ngram) Drafter { return lookup{g} }

// Decoder produces a reply's tokens one by one, as plain decoding would
// (sample from the logits, run the token, repeat), but runs them through
// the target several at a time when a drafter guesses them. It owns the
// sampler's accepted tokens from the first Next on: the caller must not
// call Accept on it.
//
// After Next returns a token, the cache holds at least every token before
// it; Finish makes it hold exactly those, as plain decoding leaves it.
type Decoder struct {
	seq     *infer.Sequence
	smp     *sample.Sampler
	drafter Drafter // nil: plain decoding
	ctl     Control
	step    float64 // EMA of a plain step, seconds; 0: not measured yet (no drafting before)
	stats   Stats

	last    int32     // the last token returned, not yet in the cache; −1: none yet
	logits  []float32 // the logits it was drawn from
	queue   []int32   // tokens decided by the last verify pass, not yet returned
	queueAt int
	rowOf   []int // the verify row each queued token was drawn from
	rows    []float32
	plain   int // the cache length plain decoding would have now
	batch   []int32
	rej     Rejection
	sampled time.Duration // time spent sampling, for the profile
	// behind are tokens the cache holds in name that a recurrent state has
	// not absorbed: after a partial acceptance the state goes back to the
	// verify pass's snapshot (a state cannot be truncated), and rather than
	// run the kept tokens again at once, they go at the front of the next
	// pass, which costs next to nothing more.
	behind []int32
	ctx    []int32
	// chain, while set (UseChain), runs plain greedy or top-k sampled
	// steps with the host off the critical path (infer.Chain): the cache
	// then also holds last.
	chain *infer.Chain
}

// NewDecoder decodes on seq, whose model's logits follow the prompt (a
// Prefill just ran), sampling with smp. drafter nil is plain decoding;
// maxDraft caps the draft length (0: DefaultMaxDraft).
func NewDecoder(seq *infer.Sequence, smp *sample.Sampler, drafter Drafter, maxDraft int) *Decoder {
	if maxDraft <= 0 {
		maxDraft = DefaultMaxDraft
	}
	if drafter != nil && !seq.Model().CanVerify() {
		drafter = nil
	}
	return &Decoder{seq: seq, smp: smp, drafter: drafter, last: -1, plain: seq.Len(),
		ctl: NewControl(min(maxDraft, seq.Model().MaxBatch()-1))}
}

// Stats are the speculation counts so far.
func (d *Decoder) Stats() Stats { return d.stats }

// Logits are those the last token Next returned was drawn from; they stay
// valid until the next call (nil after a chained step: see UseChain).
func (d *Decoder) Logits() []float32 { return d.logits }

// Len is the cache length plain decoding would have now: the prompt and
// every token returned but the last.
func (d *Decoder) Len() int { return d.plain }

// Next returns the next token. limit, when positive, is the most tokens
// the caller may still take, this one included: drafting beyond it would
// be wasted.
func (d *Decoder) Next(limit int) (int32, error) {
	if d.queueAt < len(d.queue) {
		return d.pop(), nil
	}
	m := d.seq.Model()
	if d.last < 0 { // the prompt's logits
		return d.take(m.Logits()), nil
	}
	// The cache holds every token before last (and last too while a chain
	// is in flight): run it, with a draft if one is worth verifying.
	held := d.seq.Len()
	if d.chain != nil && d.chain.InFlight() {
		held--
	}
	room := m.Context() - held - len(d.behind) - 1
	k := 0
	if d.step > 0 {
		k = d.ctl.Len()
	}
	if limit > 0 {
		k = min(k, limit-1)
	}
	k = min(k, room)
	var drafts []int32
	var dists [][]sample.Prob
	start := time.Now()
	if d.drafter != nil && k > 0 {
		d.ctx = append(append(append(d.ctx[:0], d.seq.Tokens()[:held]...), d.behind...), d.last)
		var err error
		if drafts, dists, err = d.drafter.Draft(d.ctx, k); err != nil {
			return 0, fmt.Errorf("drafting: %w", err)
		}
		drafts = drafts[:min(len(drafts), k)]
		if len(drafts) > 0 { // verified without the chain, which then starts again
			if err := d.UseChain(false); err != nil {
				return 0, err
			}
		}
	}
	if len(drafts) == 0 {
		if d.chain != nil && len(d.behind) == 0 && d.chain.Room() {
			id, err := d.chain.Next(d.last)
			if err != nil {
				d.chain = nil
				return 0, err
			}
			d.plain++
			d.smp.Accept(id)
			d.last, d.logits = id, nil
			d.plainStep(time.Since(start))
			return id, nil
		}
		if err := d.UseChain(false); err != nil {
			return 0, err
		}
		if err := d.catchUp(d.last); err != nil {
			return 0, err
		}
		d.plain++
		id := d.take(m.Logits())
		d.plainStep(time.Since(start))
		return id, nil
	}
	return d.verify(drafts, dists, start)
}

// verify runs last and the drafts in one pass and queues the tokens it
// decides: the accepted drafts, then the target's own next token.
func (d *Decoder) verify(drafts []int32, dists [][]sample.Prob, start time.Time) (int32, error) {
	V := d.seq.Model().Hparams.Vocab
	base, o := d.seq.Len(), len(d.behind)
	d.batch = append(append(append(d.batch[:0], d.behind...), d.last), drafts...)
	// The first pass of a size pays a one-time cost (VerifiedRows), not
	// what drafting costs: it is left out of the timing.
	timed := len(d.batch) <= d.seq.Model().VerifiedRows()
	rows, err := d.seq.Verify(d.batch)
	if err != nil {
		return 0, err
	}
	d.rows = rows
	d.queue, d.rowOf, d.queueAt = d.queue[:0], d.rowOf[:0], 0
	sampling := time.Now()
	greedy := d.smp.Params().Temperature == 0
	accepted := 0
	for i, x := range drafts {
		row := rows[(o+i)*V : (o+i+1)*V]
		var y int32
		ok := false
		if dists == nil || greedy {
			// A point mass on x: draw as plain decoding does and keep x
			// when the draw is x (accept.go).
			y = d.smp.Sample(row)
			ok = y == x
		} else {
			y, ok = d.rej.Decide(d.smp, row, x, dists[i])
		}
		d.smp.Accept(y)
		d.queue, d.rowOf = append(d.queue, y), append(d.rowOf, o+i)
		if !ok {
			break
		}
		accepted++
	}
	if accepted == len(drafts) { // every draft taken: the last row gives one more
		n := o + len(drafts)
		y := d.smp.Sample(rows[n*V : (n+1)*V])
		d.smp.Accept(y)
		d.queue, d.rowOf = append(d.queue, y), append(d.rowOf, n)
	}
	d.timeSampling(sampling)
	// The cache keeps what was behind, last and the accepted drafts; the
	// last queued token is the next one to run.
	kept := o + 1 + accepted
	d.behind = d.behind[:0]
	if d.seq.Model().Recurrent() && kept < len(d.batch) {
		d.behind = append(d.behind, d.batch[:kept]...)
		kept = 0
	}
	if err := d.seq.Rewind(base + kept); err != nil {
		return 0, err
	}
	d.stats.Drafted += len(drafts)
	d.stats.Accepted += accepted
	d.stats.Passes++
	// The gain: the tokens the pass produced against the plain steps
	// its time would have taken; not judged on an untimed pass.
	gain := 0.0
	if took := time.Since(start); timed && took > 0 && d.step > 0 {
		gain = float64(accepted+1) * d.step / took.Seconds()
	}
	d.ctl.Verified(len(drafts), accepted, gain)
	d.plain++ // last is in
	return d.pop(), nil
}

// plainStep records a step that ran one token in t.
func (d *Decoder) plainStep(t time.Duration) {
	d.step = ema(d.step, t.Seconds())
	d.ctl.Plain()
}

// pop returns the next queued token.
func (d *Decoder) pop() int32 {
	V := d.seq.Model().Hparams.Vocab
	i := d.queueAt
	d.queueAt++
	if i > 0 {
		d.plain++ // the token returned before it is in the cache
	}
	r := d.rowOf[i]
	d.last, d.logits = d.queue[i], d.rows[r*V:(r+1)*V]
	return d.last
}

// TakeSamplingTime is the time spent sampling since the last call.
func (d *Decoder) TakeSamplingTime() time.Duration {
	t := d.sampled
	d.sampled = 0
	return t
}

// take draws the next token from logits.
func (d *Decoder) take(logits []float32) int32 {
	defer d.timeSampling(time.Now())
	id := d.smp.Sample(logits)
	d.smp.Accept(id)
	d.last, d.logits = id, logits
	return id
}

// catchUp runs what is behind and then tok, leaving the logits after tok
// in the model.
func (d *Decoder) catchUp(tok int32) error {
	if len(d.behind) == 0 {
		return d.seq.Append(tok)
	}
	d.ctx = append(append(append(d.ctx[:0], d.seq.Tokens()...), d.behind...), tok)
	if _, err := d.seq.Prefill(d.ctx, nil); err != nil {
		return err
	}
	d.behind = d.behind[:0]
	return nil
}

// UseChain turns chained steps on or off (infer.Chain): on, plain steps
// of a greedy sampler without penalties, or of a top-k sampler without
// penalties (sample.Params.TopCandidates: the draw then depends on the
// top-k alone, which the device hands over), run chained where the model
// can chain them (Logits is then nil), a step with a draft to verify
// stopping the chain first; off, the chain in flight is waited for and the
// cache left as plain decoding leaves it. Turn it off before anything else
// runs on the model (profiling, another pass).
func (d *Decoder) UseChain(on bool) error {
	if on {
		switch {
		case d.chain != nil:
		case d.smp.Params().Argmax():
			d.chain = d.seq.NewChain()
		default: // nil unless the draw depends on the top-k alone
			d.chain = d.seq.NewSampledChain(d.smp)
		}
		return nil
	}
	c := d.chain
	if c == nil {
		return nil
	}
	d.chain = nil
	if _, inFlight, err := c.Stop(); err != nil || !inFlight {
		return err
	}
	return d.seq.Rewind(d.seq.Len() - 1) // last, which the next step runs
}

// Finish leaves the cache as plain decoding would after the tokens Next
// returned: holding every token before the last one.
func (d *Decoder) Finish() error {
	if err := d.UseChain(false); err != nil {
		return err
	}
	d.queue, d.queueAt = d.queue[:0], 0
	if held := d.seq.Len(); d.plain > held { // some of behind belong: run them
		d.ctx = append(append(d.ctx[:0], d.seq.Tokens()...), d.behind[:d.plain-held]...)
		d.behind = d.behind[:0]
		_, err := d.seq.Prefill(d.ctx, nil)
		return err
	}
	d.behind = d.behind[:0]
	if d.seq.Len() > d.plain {
		return d.seq.Rewind(d.plain)
	}
	return nil
}

func (d *Decoder) timeSampling(since time.Time) { d.sampled += time.Since(since) }
