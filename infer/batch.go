package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/profile"
)

// Row is one token of a pass whose rows may belong to different sequences
// (continuous batching): each sequence owns a region of the KV cache that
// starts at Base, and the row is the token at position Pos of its sequence.
// RoPE rotates it by Pos; its K and V land at cache position Base+Pos; its
// attention sees cache positions Base … Base+Pos, its own sequence's past.
type Row struct {
	Token int32
	Pos   int
	Base  int
	// Step says the row is its sequence's next decoding step (see
	// Batch.Steps): its attention rounds as a pass of that one token would,
	// and so do the products when every row of the pass is a step.
	Step bool
}

// RowBackend is what a backend adds to run passes over Rows. It is
// optional: a backend without it makes Model.ForwardRows fail with
// ErrUnsupportedOp, and a caller then runs one sequence at a time.
type RowBackend interface {
	// BeginRows starts a pass like Begin over len(rows) rows, row i being
	// rows[i] (see Row for what Rope, StoreKV and Attention do with it).
	// Every Base+Pos must fit the KV cache. Recurrent ops fail in such a
	// pass: their state belongs to one sequence.
	BeginRows(rows []Row)
	// GatherRows copies row idx[j] of src into row j of dst for each j:
	// the rows whose logits a pass needs. dst has src's columns and
	// len(idx) rows at least; every idx[j] is an active row of src.
	GatherRows(dst, src Tensor, idx []int)
}

// rowNetwork is a Network that runs passes over Rows.
type rowNetwork interface {
	forwardRows(rb RowBackend, rows []Row, outs []int, logits []float32) error
}

// ForwardRows runs one pass over rows that may belong to different
// sequences at different positions, each in its own region of the KV cache
// (see Row), and writes the logits after row outs[j] into
// logits[j·Vocab : (j+1)·Vocab]. Unlike Forward it does not split the pass:
// len(rows) must be at most MaxBatch. On a CPU a pass costs about what
// reading the weights costs, so N sequences decoding one token each take
// little more than one.
//
// It fails with ErrUnsupportedOp when the backend lacks RowBackend or the
// network cannot (recurrent layers, whose one state cannot serve several
// sequences), and runs nothing then.
func (m *Model) ForwardRows(rows []Row, outs []int, logits []float32) error {
	rb, ok := m.backend.(RowBackend)
	rn, ok2 := m.net.(rowNetwork)
	if !ok || !ok2 || m.Recurrent() {
		return fmt.Errorf("%w: passes over rows of several sequences on %s (%s)", ErrUnsupportedOp, m.backend.Name(), m.Hparams.Arch)
	}
	if len(rows) == 0 || len(rows) > m.maxBatch {
		return fmt.Errorf("%w: %d rows in one pass, at most %d", ErrBadShape, len(rows), m.maxBatch)
	}
	for _, r := range rows {
		if r.Token < 0 || int(r.Token) >= m.Hparams.Vocab {
			return fmt.Errorf("%w: token id %d outside the vocabulary of %d", ErrBadShape, r.Token, m.Hparams.Vocab)
		}
		if r.Pos < 0 || r.Base < 0 || r.Base+r.Pos >= m.context {
			return fmt.Errorf("%w: position %d of the sequence at %d is past the cache of %d", ErrContextFull, r.Pos, r.Base, m.context)
		}
	}
	if len(outs) == 0 || len(logits) < len(outs)*m.Hparams.Vocab {
		return fmt.Errorf("%w: %d outputs into %d logits", ErrBadShape, len(outs), len(logits))
	}
	for _, o := range outs {
		if o < 0 || o >= len(rows) {
			return fmt.Errorf("%w: output row %d of %d", ErrBadShape, o, len(rows))
		}
	}
	return rn.forwardRows(rb, rows, outs, logits)
}

// RowsSupported says ForwardRows can run on this model and backend.
func (m *Model) RowsSupported() bool {
	_, ok := m.backend.(RowBackend)
	_, ok2 := m.net.(rowNetwork)
	return ok && ok2 && !m.Recurrent()
}

// rowOutputs are the output head's tensors for a pass that needs the
// logits of n rows.
type rowOutputs struct{ x, logits Tensor }

func (n *qwen3) forwardRows(rb RowBackend, rows []Row, outs []int, logits []float32) error {
	o, err := n.outputsFor(len(outs))
	if err != nil {
		return err
	}
	b := n.b
	rb.BeginRows(rows)
	n.blocks(false)
	b.Phase(profile.OutputHead)
	rb.GatherRows(o.x, n.x, outs)
	b.RMSNorm(o.x, o.x, n.outNorm, n.hp.RMSEps)
	n.matmul(o.logits, n.output, o.x)
	b.Read(o.logits, logits)
	return b.Commit()
}

// outputsFor allocates (once per count) the tensors of k output rows: an
// op acts on min(rows, batch) rows, so a tensor of exactly k rows makes the
// output head run on k rows, not on the whole batch.
func (n *qwen3) outputsFor(k int) (rowOutputs, error) {
	if o, ok := n.rowOuts[k]; ok {
		return o, nil
	}
	if err := n.rot.Reserve(k); err != nil {
		return rowOutputs{}, err
	}
	alloc := tensorAllocator{b: n.b}
	o := rowOutputs{
		x:      alloc.tensor(fmt.Sprintf("rows.%d.x", k), k, n.hp.Embed),
		logits: alloc.tensor(fmt.Sprintf("rows.%d.logits", k), k, n.hp.Vocab),
	}
	if alloc.err != nil {
		return rowOutputs{}, alloc.err
	}
	if n.rowOuts == nil {
		n.rowOuts = map[int]rowOutputs{}
	}
	n.rowOuts[k] = o
	return o, nil
}
