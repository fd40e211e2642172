package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/cogentcore/webgpu/wgpu"
)

// Chained greedy decoding (infer.ChainedArgmax): a one-token pass's Argmax
// also lands in the token buffer, where the next pass's embedding reads
// it, and Commit returns once the pass is submitted, after reading back
// the previous pass's token (which the GPU finished while this pass was
// encoded). The host's encoding of token t+1 then overlaps the GPU's
// running of token t instead of following it. Two staging buffers
// alternate: a map pending on one never meets the next pass's copy into
// the other.
type chain struct {
	on bool
	// fromDevice: the next Begin's token is already in the token buffer
	fromDevice bool
	stage      [2]*wgpu.Buffer
	next       int          // the stage the next chained Argmax copies into
	pending    *pendingRead // the submitted pass's token, not yet read back
	pass       *pendingRead // the pass in progress's token
	// tokens: the pass in progress took its token from the device
	tokens bool

	// sampled chains: the pick, and whether the next Begin's token is
	// its; the pass in progress's top-k and the submitted one's; pieces
	// of a pass waiting for its token
	pick      chainPick
	fromPick  bool
	picking   bool
	passCands *cands
	cands     *cands
	held      []*wgpu.CommandBuffer
	top       []sample.Logit
}

var _ infer.ChainedArgmax = (*Backend)(nil)

// errChainRead is a regular Read or a batch in a chained pass: chained
// passes decode one token and read nothing but its Argmax.
var errChainRead = errors.New("gpu: chained pass with a read or more than one token")

// SetChained turns chained mode on or off; off waits for the pass in flight
// and fills its Argmax destination.
func (b *Backend) SetChained(on bool) error {
	if on == b.chain.on {
		return nil
	}
	if on {
		for i := range b.chain.stage {
			if b.chain.stage[i] == nil {
				s, err := b.d.newBuffer("chain.read", 4, readUsage)
				if err != nil {
					return err
				}
				b.chain.stage[i] = s
			}
		}
		// a recurrent state steps by ping-pong in chained passes
		// (hybrid.go's recurrent), so the pass in flight can be taken back
		if err := b.twins(); err != nil {
			return err
		}
		b.chain.on = true
		return nil
	}
	b.chain.on, b.chain.fromDevice, b.chain.fromPick = false, false, false
	if b.chain.cands != nil {
		// a sampled chain's last top-k: nobody picks from it
		b.chain.cands = nil
		if err := waitIdle(b.d.dev); err != nil {
			return err
		}
	}
	return b.chainDrain()
}

// ChainToken makes the next Begin's one token the one the last chained
// pass's Argmax left on the device (the batch's token is a placeholder).
func (b *Backend) ChainToken() {
	if b.chain.on {
		b.chain.fromDevice = true
	}
}

// ChainEmbeds reports whether w is a Q1_0 embedding, which the GPU reads
// by the token buffer; other types are dequantized on the host.
func (b *Backend) ChainEmbeds(wI infer.Weight) bool {
	w, ok := wI.(*weight)
	return ok && w.q1()
}

// chainDrain reads back the pending chained token, if any.
func (b *Backend) chainDrain() error {
	r := b.chain.pending
	if r == nil {
		return nil
	}
	b.chain.pending = nil
	var s [4]byte
	if err := readBuffer(b.d.dev, r.staging, 0, s[:]); err != nil {
		return err
	}
	r.ints[0] = int32(uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24)
	return nil
}

// chainArgmax is Argmax's epilogue in a chained one-token pass: the token
// goes to the token buffer for the next pass and to a staging buffer read
// back at the next Commit. It reports false outside chained mode.
func (b *Backend) chainArgmax(t *tensor, dst []int32) bool {
	if !b.chain.on || b.n != 1 || t.rows < 1 {
		return false
	}
	b.endPass()
	if err := b.enc.CopyBufferToBuffer(t.argmax, 0, b.tokensBuf, 0, 4); err != nil {
		b.fail(err)
	}
	st := b.chain.stage[b.chain.next]
	b.chain.next = 1 - b.chain.next
	if err := b.enc.CopyBufferToBuffer(t.argmax, 0, st, 0, 4); err != nil {
		b.fail(err)
	}
	b.beginPass()
	if b.chain.pass != nil {
		b.fail(errChainRead)
		return true
	}
	b.chain.pass = &pendingRead{staging: st, bytes: 4, ints: dst[:1]}
	return true
}

// Chained sampled decoding (infer.ChainedSampler): a chained one-token
// pass ends with its logits' top-k (ChainTopK), copied to a staging
// buffer, and the next pass, begun after ChainPick, is encoded while it
// runs; that pass's pieces are held, not submitted, until its Commit has
// read the candidates back, asked the host's pick for the token and
// written it into the token buffer (a queue write, ordered before the
// pass). Only the read, the pick and the submit are in series with the
// GPU; the encoding overlaps the previous pass.
type chainPick = func(top []sample.Logit, row []float32) (int32, error)

// cands is a chained pass's top-k: where it lands and the logits it
// was taken from (still on the device until the next pass is submitted).
type cands struct {
	tk *topK
	t  *tensor
}

var _ infer.ChainedSampler = (*Backend)(nil)

// MaxChainTopK is the largest k ChainTopK takes.
func (b *Backend) MaxChainTopK() int { return MaxTopK }

// ChainPick makes the next Begin's one token the one pick returns from the
// last chained pass's top-k, at that pass's Commit.
func (b *Backend) ChainPick(pick chainPick) {
	if b.chain.on {
		b.chain.pick, b.chain.fromPick = pick, true
	}
}

// ChainTopK ends a chained one-token pass with the k best of t's last
// row, read back at the next pass's Commit (or dropped by
// SetChained(false)).
func (b *Backend) ChainTopK(tT infer.Tensor, k int) {
	if !b.ready() {
		return
	}
	t := b.tensorArg("ChainTopK", tT)
	if t == nil {
		return
	}
	if !b.chain.on || b.n != 1 {
		b.fail(errChainRead)
		return
	}
	if k < 1 || k > MaxTopK || k >= t.cols {
		b.shapeErr("ChainTopK: k %d (at most %d, below %d columns)", k, MaxTopK, t.cols)
		return
	}
	tk, err := b.prepareTopK(t, k)
	if err != nil {
		b.fail(fmt.Errorf("gpu: top-k: %w", err))
		return
	}
	if tk.row == nil {
		if tk.row, err = b.d.newBuffer(t.name+".topk.row", uint64(4*t.cols), readUsage); err != nil {
			b.fail(err)
			return
		}
	}
	b.encodeTopK(tk)
	b.copyOut(tk.out, tk.stage, 8*k)
	b.chain.passCands = &cands{tk: tk, t: t}
}

// beginPicking starts a pass: it takes its token from the pick when
// ChainPick asked so and the pass is one token.
func (c *chain) beginPicking(n int) {
	c.picking = c.fromPick && n == 1
	c.fromPick = false
	c.passCands = nil
	c.dropHeld()
}

// submitOrHold submits a piece of the pass, or holds it while the pass
// waits for its token.
func (b *Backend) submitOrHold(cmd *wgpu.CommandBuffer) {
	if b.chain.picking {
		b.chain.held = append(b.chain.held, cmd)
		return
	}
	b.d.queue.Submit(cmd)
	cmd.Release()
}

func (c *chain) dropHeld() {
	for _, cmd := range c.held {
		cmd.Release()
	}
	c.held = c.held[:0]
}

// submittedCandidates, right after a pass is submitted, makes its top-k
// the pending one and reports whether it had one.
func (c *chain) submittedCandidates() bool {
	p := c.passCands
	c.passCands = nil
	if p == nil {
		return false
	}
	c.cands = p
	return true
}

// chainPick, in the Commit of a pass that takes its token from the pick,
// reads the previous pass's top-k (the whole row when it holds a NaN),
// picks the token, writes it and submits the held pieces.
func (b *Backend) chainPick() error {
	if !b.chain.picking {
		return nil
	}
	b.chain.picking = false
	c := b.chain.cands
	b.chain.cands = nil
	if c == nil {
		return errors.New("gpu: a chained pass picks its token without a previous top-k")
	}
	k := c.tk.k
	raw := make([]byte, 8*k)
	if err := readBuffer(b.d.dev, c.tk.stage, 0, raw); err != nil {
		return err
	}
	top := b.chain.top[:0]
	for i := range k {
		top = append(top, sample.Logit{ID: int32(binary.LittleEndian.Uint32(raw[8*i:])),
			Logit: math.Float32frombits(binary.LittleEndian.Uint32(raw[8*i+4:]))})
	}
	b.chain.top = top
	var row []float32
	if math.IsNaN(float64(top[0].Logit)) {
		// The order is not defined: the whole row, still the previous
		// pass's (nothing of this one has run).
		var err error
		if row, err = b.readRow(c); err != nil {
			return err
		}
		top = nil
	}
	id, err := b.chain.pick(top, row)
	if err != nil {
		return err
	}
	if id < 0 || int(id) >= c.t.cols {
		return fmt.Errorf("gpu: picked token %d of %d: %w", id, c.t.cols, infer.ErrBadShape)
	}
	var tok [4]byte
	binary.LittleEndian.PutUint32(tok[:], uint32(id))
	if err := b.d.queue.WriteBuffer(b.tokensBuf, 0, tok[:]); err != nil {
		return fmt.Errorf("gpu: writing the picked token: %w", err)
	}
	for _, cmd := range b.chain.held {
		b.d.queue.Submit(cmd)
		cmd.Release()
	}
	b.chain.held = b.chain.held[:0]
	return nil
}

// readRow reads back the first row of c's logits (a chained pass's one).
func (b *Backend) readRow(c *cands) ([]float32, error) {
	enc, err := b.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err)
	}
	defer enc.Release()
	if err := enc.CopyBufferToBuffer(c.t.buf, 0, c.tk.row, 0, uint64(4*c.t.cols)); err != nil {
		return nil, fmt.Errorf("gpu: copying the logits: %w", err)
	}
	cmd, err := enc.Finish(nil)
	if err != nil {
		return nil, fmt.Errorf("gpu: copying the logits: %w", err)
	}
	b.d.queue.Submit(cmd)
	cmd.Release()
	raw := make([]byte, 4*c.t.cols)
	if err := readBuffer(b.d.dev, c.tk.row, 0, raw); err != nil {
		return nil, err
	}
	row := make([]float32, c.t.cols)
	bytesToFloats(raw, row)
	return row, nil
}
