package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/profile"
)

// Embeddings (llama-server --embeddings, ollama's /api/embed) pool the
// final hidden states of a prompt's tokens: the residual stream after the
// last layer and the output norm, which the output head would multiply into
// logits (llama.cpp's t_embd).

// hiddenNetwork is a Network that can write the final-norm hidden state of
// every token of a pass. qwen3 and qwen35 are.
type hiddenNetwork interface {
	// forwardHidden runs the pass begun by begin over the batch's tokens
	// and writes the normed hidden state of each into out, row i (Embed
	// values) after Tokens[i].
	forwardHidden(begin func(), out []float32) error
}

func (n *qwen3) forwardHidden(begin func(), out []float32) error {
	begin()
	n.blocks(false)
	return hiddenHead(n.b, n.x, n.outNorm, n.hp.RMSEps, out)
}

func (n *qwen35) forwardHidden(begin func(), out []float32) error {
	begin()
	n.blocks()
	return hiddenHead(n.b, n.x, n.outNorm, n.p.RMSEps, out)
}

// hiddenHead normalises the residual stream x in place (the trunk is done
// with it) and reads it out. It ends the pass.
func hiddenHead(b Backend, x Tensor, norm Weight, eps float32, out []float32) error {
	b.Phase(profile.OutputHead)
	b.RMSNorm(x, x, norm, eps)
	b.Read(x, out)
	return b.Commit()
}

// Hidden runs tokens at positions pos, pos+1, … of the sequence whose KV
// cache region starts at base, in one pass (at most MaxBatch tokens), and
// writes the final-norm hidden state after each token into out: row i,
// Embed values, follows tokens[i]. The region then holds the tokens' keys
// and values, as after a prefill of them; Logits is left as it was.
//
// A base other than 0 needs passes over rows (RowsSupported), and on a
// recurrent network runs on the sequence state seq (Row.Seq, UseSequences),
// continuing it unless pos is 0. At base 0 seq is 0 and pos must be where
// Forward's state can continue.
func (m *Model) Hidden(tokens []int32, pos, base, seq int, out []float32) error {
	hn, ok := m.net.(hiddenNetwork)
	if !ok {
		return fmt.Errorf("%w: hidden states of this network", ErrUnsupportedOp)
	}
	E := m.Hparams.Embed
	if len(tokens) == 0 || len(tokens) > m.maxBatch || len(out) < len(tokens)*E {
		return fmt.Errorf("%w: %d tokens (1 to %d a pass) into %d hidden values of rows of %d", ErrBadShape, len(tokens), m.maxBatch, len(out), E)
	}
	if pos < 0 || base < 0 || base+pos+len(tokens) > m.context {
		return fmt.Errorf("%w: %d tokens at position %d of the sequence at %d exceed the context of %d", ErrContextFull, len(tokens), pos, base, m.context)
	}
	if err := m.checkIDs(tokens); err != nil {
		return err
	}
	begin := func() { m.backend.Begin(Batch{Tokens: tokens, Pos: pos}) }
	if base != 0 || seq != 0 {
		rb, ok := m.backend.(RowBackend)
		if !ok || !m.RowsSupported() {
			return fmt.Errorf("%w: a sequence at cache position %d needs passes over rows", ErrUnsupportedOp, base)
		}
		if m.Recurrent() && (seq < 0 || seq >= m.seqs) {
			return fmt.Errorf("%w: sequence state %d, the model keeps %d (UseSequences)", ErrBadShape, seq, m.seqs)
		}
		rows := make([]Row, len(tokens))
		for i, id := range tokens {
			rows[i] = Row{Token: id, Pos: pos + i, Base: base, Seq: seq}
		}
		rb.BeginRows(rows)
		err := hn.forwardHidden(func() {}, out[:len(tokens)*E])
		if m.Recurrent() && seq == 0 {
			m.statePos = -1 // Forward's state ran another sequence
		}
		return err
	}
	if m.Recurrent() {
		if err := m.Restore(pos); err != nil {
			return err
		}
		m.DropAfter(pos)
	}
	if err := hn.forwardHidden(begin, out[:len(tokens)*E]); err != nil {
		if m.Recurrent() {
			m.statePos = -1 // a failed pass may have advanced part of the state
		}
		return err
	}
	if m.Recurrent() {
		m.statePos = pos + len(tokens)
	}
	return nil
}
