package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/sample"
)

// Chain decodes greedily on a sequence with the host off the critical path
// (ChainedArgmax, on a chainNetwork whose embeddings the device can look
// up): each pass's
// argmax stays on the device as the next pass's token, and pass t+1 is
// encoded and submitted while pass t runs, its token read back meanwhile.
// So Next returns a token while the pass that runs it is already in
// flight: the cache holds the token Next returned, one more than plain
// decoding holds, until Stop. A caller that goes on plainly gives that
// position back (Sequence.Rewind one token, or its next Forward one
// position short), on a network with recurrent layers too: there the
// backend keeps the state one token back across a chained pass
// (ChainedRecurrent) and the rewind takes the pass back on the device.
type Chain struct {
	m *Model
	// held is what the cache region the chain decodes in holds, position
	// by position (a Sequence's tokens, or a scheduler slot's); reset
	// forgets it when a failed pass leaves the device's cache unknown.
	held  *[]int32
	reset func()
	cb    ChainedArgmax
	n     chainNetwork
	on    bool // a chained pass is in flight
	// ring holds the argmax destinations of the last two passes: pass j's
	// is filled when pass j+1 is committed (or by Stop).
	ring   [2][1]int32
	passes int
	tok    [1]int32 // the batch of the pass being encoded
	// a sampled chain (NewSampledChain): its backend, sampler and k,
	// and the token the last pick drew
	sb     ChainedSampler
	smp    *sample.Sampler
	k      int
	picked int32
}

// NewSampledChain returns a chain on s that samples with smp, drawing
// each token from the pass's top-k exactly as smp.Sample would from its
// logits (sample.Params.TopCandidates), or nil where that cannot be.
func (s *Sequence) NewSampledChain(smp *sample.Sampler) *Chain {
	return s.m.sampledChain(s.NewChain(), smp)
}

// sampledChain makes c sample with smp, or returns nil where the backend
// cannot draw smp's tokens from a chained top-k.
func (m *Model) sampledChain(c *Chain, smp *sample.Sampler) *Chain {
	sb, ok := m.backend.(ChainedSampler)
	p := smp.Params()
	if c == nil || !ok || !p.TopCandidates(m.Hparams.Vocab, sb.MaxChainTopK()) {
		return nil
	}
	c.sb, c.smp, c.k = sb, smp, p.TopK
	return c
}

// ChainOn returns a chain that decodes in the cache region at position 0
// whose tokens *held are (a scheduler's slot, which tracks what its region
// holds itself), sampling as smp does: greedily when smp.Params().Argmax(),
// else from a chained top-k (NewSampledChain). It returns nil where the
// backend, the network or the sampler cannot chain. Next appends to *held
// as it does to a Sequence's tokens; a failed pass empties it and drops
// the model's snapshots.
func (m *Model) ChainOn(held *[]int32, smp *sample.Sampler) *Chain {
	c := m.newChain(held, func() {
		*held = (*held)[:0]
		m.Drop()
	})
	if smp == nil || smp.Params().Argmax() {
		return c
	}
	return m.sampledChain(c, smp)
}

// pick draws the token of a sampled chain's pass from the previous pass's
// candidates (the whole row when they are not defined).
func (c *Chain) pick(top []sample.Logit, row []float32) (int32, error) {
	if top != nil {
		c.picked = c.smp.SampleTop(top)
	} else {
		c.picked = c.smp.Sample(row)
	}
	return c.picked, nil
}

// chainNetwork is a network whose one-token pass can end on the device:
// the token looked up in its embedding there (ChainEmbeds), its logits'
// argmax or top-k left there (the chain ends the pass: pass).
type chainNetwork interface {
	// embedding is the matrix the pass looks its token up in.
	embedding() Weight
	// encode begins a pass over the batch and encodes it up to the
	// logits of its last row, in logitsTensor.
	encode(batch Batch)
	logitsTensor() Tensor
}

// ChainedRecurrent is a ChainedArgmax backend that keeps a network's
// recurrent state one token back across a chained pass, so that the pass
// in flight when a chain stops can be taken back on a recurrent network
// as on any other (the callers rewind one token: Sequence.Rewind, or the
// next Forward one position short).
type ChainedRecurrent interface {
	// CanStepBack reports whether StepBack would succeed.
	CanStepBack() bool
	// StepBack returns the recurrent state to what it was before the
	// last pass, which was a chained one-token pass; ErrStateMismatch,
	// changing nothing, where it was not.
	StepBack() error
}

// NewChain returns a chain on s, or nil where its backend or network
// cannot chain (plain decoding is then the way).
func (s *Sequence) NewChain() *Chain { return s.m.newChain(&s.tokens, s.Reset) }

func (m *Model) newChain(held *[]int32, reset func()) *Chain {
	cb, ok := m.backend.(ChainedArgmax)
	n, ok2 := m.net.(chainNetwork)
	if !ok || !ok2 || !cb.ChainEmbeds(n.embedding()) {
		return nil
	}
	if _, back := m.backend.(ChainedRecurrent); m.Recurrent() && (!back || m.seqs > 1) {
		return nil // the pass in flight could not be taken back
	}
	return &Chain{m: m, held: held, reset: reset, cb: cb, n: n}
}

// backPos is the position the recurrent state can be taken back to on the
// device (StatePos−1, after a chained pass), or −1.
func (m *Model) backPos() int {
	cr, ok := m.backend.(ChainedRecurrent)
	if !ok || !m.Recurrent() || m.statePos < 1 || !cr.CanStepBack() {
		return -1
	}
	return m.statePos - 1
}

// stepBack takes the recurrent state back one chained pass, to pos (one
// short of StatePos), and reports whether it could.
func (m *Model) stepBack(pos int) bool {
	if pos < 0 || pos != m.backPos() || m.backend.(ChainedRecurrent).StepBack() != nil {
		return false
	}
	m.statePos = pos
	return true
}

// InFlight reports whether a chained pass is running (the cache then
// holds the token Next returned last).
func (c *Chain) InFlight() bool { return c.on }

// Room reports whether Next has the context it needs: a pass at the end of
// the cache (two on the first call).
func (c *Chain) Room() bool {
	need := 1
	if !c.on {
		need = 2
	}
	return len(*c.held)+need <= c.m.context
}

// Next returns the greedy token after last: the token the caller drew
// from the logits after the cache (not yet in it) on the first call, and
// after that the token Next returned (in flight). On an error the sequence
// is reset (what the device's cache holds is then unknown).
func (c *Chain) Next(last int32) (int32, error) {
	if !c.Room() {
		return 0, fmt.Errorf("%w: chained decoding at position %d of %d", ErrContextFull, len(*c.held), c.m.context)
	}
	if !c.on {
		if err := c.start(last); err != nil {
			return 0, err
		}
	}
	// This pass runs the previous one's argmax, which its Commit reads
	// back (or the token its Commit draws from the previous one's top-k).
	if c.sb != nil {
		c.sb.ChainPick(c.pick)
	} else {
		c.cb.ChainToken()
	}
	if err := c.pass(); err != nil {
		return 0, c.fail(err)
	}
	tok := c.ring[(c.passes-2)%2][0]
	if c.sb != nil {
		tok = c.picked
	}
	*c.held = append(*c.held, tok)
	return tok, nil
}

// start turns chained mode on and submits the pass that runs last.
func (c *Chain) start(last int32) error {
	c.tok[0] = last
	if err := c.m.checkIDs(c.tok[:]); err != nil {
		return err
	}
	if c.m.Recurrent() {
		// the state must be the held tokens' (as Forward's at that position)
		pos := len(*c.held)
		if err := c.m.Restore(pos); err != nil {
			return fmt.Errorf("chained decoding: %w", err)
		}
		c.m.DropAfter(pos)
	}
	if err := c.cb.SetChained(true); err != nil {
		return c.fail(err)
	}
	c.on = true
	if err := c.pass(); err != nil {
		return c.fail(err)
	}
	*c.held = append(*c.held, last)
	return nil
}

// pass submits one chained pass at the end of the cache; its token is
// c.tok unless ChainToken made it the device's (c.tok is then a
// placeholder).
func (c *Chain) pass() error {
	dst := c.ring[c.passes%2][:]
	c.passes++
	pos := len(*c.held)
	c.n.encode(Batch{Tokens: c.tok[:], Pos: pos})
	if c.sb != nil {
		c.sb.ChainTopK(c.n.logitsTensor(), c.k)
	} else {
		// the argmax lands in dst at the next pass's Commit (or Stop's)
		c.m.backend.Argmax(c.n.logitsTensor(), dst)
	}
	if err := c.m.backend.Commit(); err != nil {
		return err
	}
	if c.m.Recurrent() {
		c.m.statePos = pos + 1
	}
	return nil
}

// Stop ends chained mode, waiting for the pass in flight, and returns its
// argmax: the greedy token after the last one Next returned, which the
// cache (and a recurrent state: StatePos) holds now (ok false when nothing
// was in flight). A sampled chain
// returns -1: drawing the token would take a draw from the sampler's
// stream that plain decoding may never take.
func (c *Chain) Stop() (next int32, ok bool, err error) {
	if !c.on {
		return 0, false, nil
	}
	c.on = false
	if err := c.cb.SetChained(false); err != nil {
		c.reset()
		return 0, false, fmt.Errorf("chained decoding: %w", err)
	}
	if c.sb != nil {
		return -1, true, nil
	}
	return c.ring[(c.passes-1)%2][0], true, nil
}

func (c *Chain) fail(err error) error {
	if c.m.Recurrent() {
		c.m.statePos = -1 // a failed pass may have advanced part of the state
	}
	if c.on {
		c.on = false
		c.cb.SetChained(false) //nolint:errcheck // the first error is the one to report
	}
	c.reset()
	return fmt.Errorf("chained decoding: %w", err)
}
