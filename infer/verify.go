package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/profile"
)

// Verifying drafted tokens (speculative decoding) needs what a prompt's
// prefill discards: the next-token logits after every token of the pass, not
// only the last. The drafted tokens run through the target in one batched
// pass, as a prefill does, so that the weights are read once for all of
// them; the caller then keeps the tokens it accepts and rewinds the rest
// (Sequence.Verify, Sequence.Rewind).

// AllLogitsNetwork is a Network that can write the logits of every token of a
// pass. qwen3 and qwen35 are.
type AllLogitsNetwork interface {
	Network
	// ForwardAll runs the batch as Forward does and writes the logits
	// after each of its tokens into logits, row i (Vocab values) after
	// Tokens[i].
	ForwardAll(batch Batch, logits []float32) error
}

// rowHead is the output head over every row of a pass. Its logits tensor is
// allocated at the first verify pass, as large as that pass needs: a model
// that never speculates pays nothing for it.
type rowHead struct {
	logits Tensor
}

// run normalises the residual stream x in place (the trunk is done with
// it) and multiplies it by the output matrix into one logits row per token.
// It ends the pass that trunk began.
func (r *rowHead) run(b Backend, x Tensor, norm, output Weight, eps float32, matmul func(dst Tensor, w Weight, x Tensor), logits []float32) error {
	b.Phase(profile.OutputHead)
	b.RMSNorm(x, x, norm, eps)
	matmul(r.logits, output, x)
	b.Read(r.logits, logits)
	return b.Commit()
}

// reserve makes room for passes of n tokens, before the pass begins.
func (r *rowHead) reserve(b Backend, n, vocab, maxBatch int) error {
	if n > maxBatch {
		return fmt.Errorf("%w: %d tokens to verify, at most %d a pass", ErrBadShape, n, maxBatch)
	}
	if r.logits != nil && r.logits.Rows() >= n {
		return nil
	}
	// Room for a few more rows than asked saves reallocating as an
	// adaptive draft length grows.
	t, err := b.NewTensor("logits_rows", min(max(n, 16), maxBatch), vocab)
	if err != nil {
		return fmt.Errorf("allocating the verify logits: %w", err)
	}
	r.logits = t
	return nil
}

// ForwardAll is Forward with the output head over every token.
func (n *qwen3) ForwardAll(batch Batch, logits []float32) error {
	if err := n.rows.reserve(n.b, len(batch.Tokens), n.hp.Vocab, n.x.Rows()); err != nil {
		return err
	}
	n.trunk(batch)
	return n.rows.run(n.b, n.x, n.outNorm, n.output, n.hp.RMSEps, n.matmul, logits)
}

// ForwardAll is Forward with the output head over every token.
func (n *qwen35) ForwardAll(batch Batch, logits []float32) error {
	if err := n.rows.reserve(n.b, len(batch.Tokens), n.p.Vocab, n.x.Rows()); err != nil {
		return err
	}
	n.trunk(batch)
	return n.rows.run(n.b, n.x, n.outNorm, n.output, n.p.RMSEps, n.matmul, logits)
}

// CanVerify says the network can verify drafted tokens (ForwardAll).
func (m *Model) CanVerify() bool {
	_, ok := m.net.(AllLogitsNetwork)
	return ok
}

// ForwardAll runs tokens at positions pos, pos+1, … in one pass, as
// Forward does (the same checks, the same recurrent-state bookkeeping), and
// writes the logits after each token into logits: row i, Vocab values, is
// what Logits would hold after a Forward ending at tokens[i]. Logits then
// holds the last row. The tokens must fit one pass (MaxBatch).
func (m *Model) ForwardAll(tokens []int32, pos int, logits []float32) error {
	rn, ok := m.net.(AllLogitsNetwork)
	if !ok {
		return fmt.Errorf("%w: this network cannot verify drafted tokens", ErrUnsupportedOp)
	}
	if len(tokens) == 0 || len(tokens) > m.maxBatch {
		return fmt.Errorf("%w: %d tokens to verify, 1 to %d a pass", ErrBadShape, len(tokens), m.maxBatch)
	}
	V := m.Hparams.Vocab
	if len(logits) < len(tokens)*V {
		return fmt.Errorf("%w: %d logits for %d rows of %d", ErrBadShape, len(logits), len(tokens), V)
	}
	if pos < 0 || pos+len(tokens) > m.context {
		return fmt.Errorf("%w: %d tokens at position %d exceed the context of %d", ErrContextFull, len(tokens), pos, m.context)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= V {
			return fmt.Errorf("%w: token id %d outside the vocabulary of %d", ErrBadShape, id, V)
		}
	}
	if m.Recurrent() {
		if err := m.Restore(pos); err != nil {
			return err
		}
		m.DropAfter(pos)
	}
	if err := rn.ForwardAll(Batch{Tokens: tokens, Pos: pos, Steps: true}, logits); err != nil {
		if m.Recurrent() {
			m.statePos = -1
		}
		return err
	}
	if m.Recurrent() {
		m.statePos = pos + len(tokens)
	}
	copy(m.logits, logits[(len(tokens)-1)*V:len(tokens)*V])
	return nil
}

// Mark remembers the sequence's length as the point Rewind may go back to:
// the KV cache needs nothing for that, a recurrent model's state is copied
// to the host (it cannot be truncated). It fails with ErrStateMismatch when
// the state does not belong to the cached tokens.
func (s *Sequence) Mark() error {
	s.markPos = len(s.tokens)
	if !s.m.Recurrent() || s.markPos == 0 {
		return nil
	}
	if s.m.StatePos() != s.markPos {
		s.markPos = -1
		return fmt.Errorf("%w: marking %d tokens, the state is at %d", ErrStateMismatch, len(s.tokens), s.m.StatePos())
	}
	if n := int(s.m.rspec.Floats()); len(s.markState) != n {
		s.markState = make([]float32, n)
	}
	if err := s.m.backend.ReadRecurrentState(s.markState); err != nil {
		s.markPos = -1
		return fmt.Errorf("marking position %d: %w", len(s.tokens), err)
	}
	return nil
}

// Verify marks the sequence (Mark), runs tokens after the cached ones in
// one pass and returns the logits after each of them: row i, Vocab values,
// follows tokens[i]. The tokens join the sequence; Rewind drops those the
// caller rejects. The rows are reused by the next Verify on the model.
func (s *Sequence) Verify(tokens []int32) ([]float32, error) {
	if err := s.Mark(); err != nil {
		return nil, err
	}
	m, V := s.m, s.m.Hparams.Vocab
	need := len(tokens) * V
	if cap(m.rows) < need {
		m.rows = make([]float32, max(need, 16*V))
	}
	rows := m.rows[:need]
	if err := s.m.ForwardAll(tokens, len(s.tokens), rows); err != nil {
		return nil, err
	}
	m.verified = max(m.verified, len(tokens))
	s.tokens = append(s.tokens, tokens...)
	return rows, nil
}

// Rewind shortens the sequence to its first n tokens, n at least the
// length at the last Mark (or Verify). The KV cache just forgets the
// positions after n (the next pass overwrites them). A recurrent model's
// state goes back to the mark's snapshot and runs the kept tokens after the
// mark again, since a state cannot be truncated; Model().Logits() then
// follows token n−1 (on a network without recurrent layers it is left as
// it was). The one exception: a chained pass in flight when its chain
// stopped is taken back on the device (ChainedRecurrent), Logits left.
func (s *Sequence) Rewind(n int) error {
	if n == len(s.tokens) {
		return nil
	}
	if n < s.markPos || n > len(s.tokens) || s.markPos < 0 {
		return fmt.Errorf("%w: rewinding %d tokens to %d, the mark is at %d", ErrBadShape, len(s.tokens), n, s.markPos)
	}
	if !s.m.Recurrent() || n == len(s.tokens)-1 && s.m.stepBack(n) { // a chained pass taken back
		s.tokens = s.tokens[:n]
		return nil
	}
	m := s.m
	m.DropAfter(s.markPos)
	if s.markPos == 0 {
		m.statePos = 0 // a pass at position 0 starts from zero state
	} else {
		if err := m.backend.WriteRecurrentState(s.markState); err != nil {
			m.statePos = -1
			s.tokens = s.tokens[:s.markPos]
			return fmt.Errorf("rewinding to position %d: %w", s.markPos, err)
		}
		m.statePos = s.markPos
	}
	if n > s.markPos {
		if err := m.Forward(s.tokens[s.markPos:n], s.markPos); err != nil {
			s.tokens = s.tokens[:s.markPos]
			return fmt.Errorf("rewinding to position %d: %w", n, err)
		}
	}
	s.tokens = s.tokens[:n]
	return nil
}

// VerifiedRows is the largest verify pass the model has run. The first
// pass of a larger size touches memory none has (the logits rows, the
// backend's scratch), which on a busy machine can cost more than the pass
// itself: a caller timing passes should not judge by that one.
func (m *Model) VerifiedRows() int { return m.verified }
