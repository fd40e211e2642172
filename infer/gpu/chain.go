package gpu

import (
	"errors"

	"github.com/bonsai-chat/bonsai/infer"
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
		b.chain.on = true
		return nil
	}
	b.chain.on, b.chain.fromDevice = false, false
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
