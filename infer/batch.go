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
	// and so do the products when every row of the pass is a step (on a
	// RowPasses backend, rows its OnePass takes round within float
	// rounding of that).
	Step bool
	// Seq is the recurrent-state slot of the row's sequence (SeqStates),
	// on a network with recurrent layers: the rows of one slot are
	// consecutive and in position order, the first at Pos 0 starts the
	// slot from zero state and a later one continues the state the slot's
	// last row left.
	Seq int
}

// RowBackend is what a backend adds to run passes over Rows. It is
// optional: a backend without it makes Model.ForwardRows fail with
// ErrUnsupportedOp, and a caller then runs one sequence at a time.
type RowBackend interface {
	// BeginRows starts a pass like Begin over len(rows) rows, row i being
	// rows[i] (see Row for what Rope, StoreKV, Attention and the recurrent
	// ops do with it). Every Base+Pos must fit the KV cache; on a backend
	// with recurrent state every Seq must be a slot of SeqStates, else the
	// recurrent ops fail. A RowPasses backend takes one run (rowRuns).
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
// A network with recurrent layers keeps one state per sequence
// (UseSequences, Row.Seq); such a pass leaves Forward's state unknown, so
// Forward starts over at position 0 after it.
//
// It fails with ErrUnsupportedOp when the backend lacks RowBackend (or
// SeqStates, for recurrent layers) or the network cannot, and runs nothing
// then.
func (m *Model) ForwardRows(rows []Row, outs []int, logits []float32) error {
	rb, ok := m.backend.(RowBackend)
	rn, ok2 := m.net.(rowNetwork)
	if !ok || !ok2 || !m.seqStatesOK() || !m.rowPassesOK() {
		return fmt.Errorf("%w: passes over rows of several sequences on %s (%s)", ErrUnsupportedOp, m.backend.Name(), m.Hparams.Arch)
	}
	if len(rows) == 0 || len(rows) > m.maxBatch {
		return fmt.Errorf("%w: %d rows in one pass, at most %d", ErrBadShape, len(rows), m.maxBatch)
	}
	seen := map[int]bool{} // the sequence states whose rows came
	for i, r := range rows {
		if r.Token < 0 || int(r.Token) >= m.Hparams.Vocab {
			return fmt.Errorf("%w: token id %d outside the vocabulary of %d", ErrBadShape, r.Token, m.Hparams.Vocab)
		}
		if r.Pos < 0 || r.Base < 0 || r.Base+r.Pos >= m.context {
			return fmt.Errorf("%w: position %d of the sequence at %d is past the cache of %d", ErrContextFull, r.Pos, r.Base, m.context)
		}
		if !m.Recurrent() {
			continue
		}
		if r.Seq < 0 || r.Seq >= m.seqs {
			return fmt.Errorf("%w: row of sequence state %d, the model keeps %d (UseSequences)", ErrBadShape, r.Seq, m.seqs)
		}
		switch {
		case i > 0 && rows[i-1].Seq == r.Seq:
			if r.Pos != rows[i-1].Pos+1 {
				return fmt.Errorf("%w: rows of sequence state %d at positions %d then %d", ErrBadShape, r.Seq, rows[i-1].Pos, r.Pos)
			}
		case seen[r.Seq]:
			return fmt.Errorf("%w: the rows of sequence state %d are not consecutive", ErrBadShape, r.Seq)
		}
		seen[r.Seq] = true
	}
	if m.Recurrent() {
		// Forward's state (slot 0) may have been another sequence's now.
		m.statePos, m.snaps = -1, nil
	}
	if len(outs) == 0 || len(logits) < len(outs)*m.Hparams.Vocab {
		return fmt.Errorf("%w: %d outputs into %d logits", ErrBadShape, len(outs), len(logits))
	}
	for _, o := range outs {
		if o < 0 || o >= len(rows) {
			return fmt.Errorf("%w: output row %d of %d", ErrBadShape, o, len(rows))
		}
	}
	if rp, ok := rb.(RowPasses); ok && !rp.OnePass(rows) {
		return m.forwardRuns(rb, rn, rows, outs, logits)
	}
	return rn.forwardRows(rb, rows, outs, logits)
}

// RowPasses is implemented by a RowBackend whose kernels take, in one
// pass, the rows of one sequence at consecutive positions (the GPU's), or
// some sets of rows only: where OnePass does not take the rows,
// ForwardRows runs each run of rows (rowRuns) as a pass of its own, a
// step row alone, through the graph Forward gives a pass of that sequence,
// so that each row rounds as a pass of its sequence alone rounds it.
type RowPasses interface {
	// RowPassesOK says passes over rows can run on the backend's cache as
	// it is now.
	RowPassesOK() bool
	// OnePass says the backend takes rows in one pass after all: the
	// rows of several sequences, each row's products then rounded as the
	// backend's kernels for that many rows round them (within float
	// rounding of a pass of its sequence alone).
	OnePass(rows []Row) bool
	// BeginRuns and EndRuns bracket the passes of one ForwardRows: the
	// backend may complete their reads (Read) only at EndRuns, which
	// waits for them.
	BeginRuns()
	EndRuns() error
}

// runNetwork is a rowNetwork that runs a run of rows (rowRuns) with the
// graph Forward gives the same tokens of one sequence: the logits after
// the run's last row into logits.
type runNetwork interface {
	forwardRun(rb RowBackend, run []Row, logits []float32) error
}

// rowRuns splits rows into the runs a RowPasses backend takes in one pass:
// rows of one sequence (Base, Seq) at consecutive positions, each step row
// a run of its own. It returns each run's end.
func rowRuns(rows []Row) []int {
	var ends []int
	for i := 1; i < len(rows); i++ {
		p, r := rows[i-1], rows[i]
		if r.Base != p.Base || r.Seq != p.Seq || r.Pos != p.Pos+1 || r.Step || p.Step {
			ends = append(ends, i)
		}
	}
	return append(ends, len(rows))
}

// forwardRuns runs ForwardRows on a RowPasses backend: a pass per run of
// rows, with Forward's graph where the run's only output is its last row.
func (m *Model) forwardRuns(rb RowBackend, rn rowNetwork, rows []Row, outs []int, logits []float32) (err error) {
	V := m.Hparams.Vocab
	rp := rb.(RowPasses)
	rp.BeginRuns()
	var after []func() // copies of logits read at EndRuns
	defer func() {
		if e := rp.EndRuns(); err == nil {
			err = e
		}
		if err == nil {
			for _, f := range after {
				f()
			}
		}
	}()
	start := 0
	for _, end := range rowRuns(rows) {
		run := rows[start:end]
		var js, ro []int // the outputs in the run: their j, their row in the run
		for j, o := range outs {
			if o >= start && o < end {
				js, ro = append(js, j), append(ro, o-start)
			}
		}
		fr, ok := m.net.(runNetwork)
		lastOnly := ok
		for _, o := range ro {
			lastOnly = lastOnly && o == len(run)-1
		}
		switch {
		case lastOnly && len(js) > 0:
			first := logits[js[0]*V : (js[0]+1)*V]
			err = fr.forwardRun(rb, run, first)
			for _, j := range js[1:] {
				after = append(after, func() { copy(logits[j*V:(j+1)*V], first) })
			}
		case lastOnly:
			err = fr.forwardRun(rb, run, make([]float32, V))
		default:
			tmp := make([]float32, len(ro)*V)
			err = rn.forwardRows(rb, run, ro, tmp)
			after = append(after, func() {
				for k, j := range js {
					copy(logits[j*V:(j+1)*V], tmp[k*V:(k+1)*V])
				}
			})
		}
		if err != nil {
			return err
		}
		start = end
	}
	return nil
}

// rowPassesOK says a RowPasses backend can run passes over rows now.
func (m *Model) rowPassesOK() bool {
	rp, ok := m.backend.(RowPasses)
	return !ok || rp.RowPassesOK()
}

// RowsSupported says ForwardRows can run on this model and backend.
func (m *Model) RowsSupported() bool {
	_, ok := m.backend.(RowBackend)
	_, ok2 := m.net.(rowNetwork)
	_, ok3 := m.backend.(SeqStates)
	return ok && ok2 && (ok3 || !m.Recurrent()) && m.rowPassesOK()
}

// UseSequences keeps n recurrent states, one per sequence that passes over
// rows may hold (Row.Seq < n), all starting empty; slot 0 is also
// Forward's. A network without recurrent layers needs none: it returns nil.
func (m *Model) UseSequences(n int) error {
	if !m.Recurrent() {
		return nil
	}
	ss, ok := m.backend.(SeqStates)
	if !ok {
		return fmt.Errorf("%w: recurrent state per sequence on %s", ErrUnsupportedOp, m.backend.Name())
	}
	if n < 1 || int64(n)*m.rspec.Bytes() > 1<<40 {
		return fmt.Errorf("%w: %d sequence states of %d bytes", ErrBadShape, n, m.rspec.Bytes())
	}
	if err := ss.NewSeqStates(n); err != nil {
		m.seqs = 1
		return err
	}
	m.seqs, m.statePos, m.snaps = n, -1, nil
	return nil
}

// seqStatesOK says passes over rows can run on this network's state.
func (m *Model) seqStatesOK() bool {
	_, ok := m.backend.(SeqStates)
	return ok || !m.Recurrent()
}

// rowOutputs are the output head's tensors for a pass that needs the
// logits of n rows.
type rowOutputs struct{ x, logits Tensor }

// rowHeads are a network's output heads for passes over rows, by output
// count.
type rowHeads struct {
	b            Backend
	rot          *Rotator
	embed, vocab int
	by           map[int]rowOutputs
}

// outputsFor allocates (once per count) the tensors of k output rows: an
// op acts on min(rows, batch) rows, so a tensor of exactly k rows makes the
// output head run on k rows, not on the whole batch.
func (h *rowHeads) outputsFor(k int) (rowOutputs, error) {
	if o, ok := h.by[k]; ok {
		return o, nil
	}
	if err := h.rot.Reserve(k); err != nil {
		return rowOutputs{}, err
	}
	alloc := tensorAllocator{b: h.b}
	o := rowOutputs{
		x:      alloc.tensor(fmt.Sprintf("rows.%d.x", k), k, h.embed),
		logits: alloc.tensor(fmt.Sprintf("rows.%d.logits", k), k, h.vocab),
	}
	if alloc.err != nil {
		return rowOutputs{}, alloc.err
	}
	if h.by == nil {
		h.by = map[int]rowOutputs{}
	}
	h.by[k] = o
	return o, nil
}

// pass runs a pass over rows: trunk leaves the residual stream of every
// row in x, then the output head (final norm, matmul) runs on the rows
// outs into logits.
func (h *rowHeads) pass(rb RowBackend, rows []Row, outs []int, logits []float32, trunk func(), x Tensor, outNorm, output Weight, eps float32) error {
	o, err := h.outputsFor(len(outs))
	if err != nil {
		return err
	}
	b := h.b
	rb.BeginRows(rows)
	trunk()
	b.Phase(profile.OutputHead)
	rb.GatherRows(o.x, x, outs)
	b.RMSNorm(o.x, o.x, outNorm, eps)
	b.MatMul(o.logits, output, h.rot.Input(output, o.x))
	b.Read(o.logits, logits)
	return b.Commit()
}

func (n *qwen3) forwardRows(rb RowBackend, rows []Row, outs []int, logits []float32) error {
	n.rowOuts.b, n.rowOuts.rot, n.rowOuts.embed, n.rowOuts.vocab = n.b, n.rot, n.hp.Embed, n.hp.Vocab
	return n.rowOuts.pass(rb, rows, outs, logits, func() { n.blocks(false) }, n.x, n.outNorm, n.output, n.hp.RMSEps)
}

func (n *qwen3) forwardRun(rb RowBackend, run []Row, logits []float32) error {
	rb.BeginRows(run)
	n.encodeBegun(len(run))
	n.b.Read(n.logits, logits)
	return n.b.Commit()
}

func (n *qwen35) forwardRun(rb RowBackend, run []Row, logits []float32) error {
	rb.BeginRows(run)
	n.blocks()
	n.head()
	n.b.Read(n.logits, logits)
	return n.b.Commit()
}

func (n *qwen35) forwardRows(rb RowBackend, rows []Row, outs []int, logits []float32) error {
	n.rowOuts.b, n.rowOuts.rot, n.rowOuts.embed, n.rowOuts.vocab = n.b, n.rot, n.p.Embed, n.p.Vocab
	return n.rowOuts.pass(rb, rows, outs, logits, n.blocks, n.x, n.outNorm, n.output, n.p.RMSEps)
}

// WarmRows runs, on a backend that creates its kernels on first use
// (Warming), the kinds of passes over rows a scheduler of seqs slots of
// slotCtx tokens runs: a decoding step of 2 … seqs sequences, a recurrent
// slot's prompt, and each of the backend's warm-up batch sizes spread over
// two sequences (prompts read beside decoding). A batched pass takes kernels a one-sequence pass does
// not (each row's own position and cache region, a recurrent state per
// slot), and without this the first replies that run together wait on
// their creation. The passes leave junk in the slots' cache regions, which
// a request writes from its first position, and in the recurrent states,
// which a row at position 0 starts over.
func (m *Model) WarmRows(seqs, slotCtx int) error {
	w, ok := m.backend.(Warming)
	if !ok || seqs < 2 || slotCtx < 2 || !m.RowsSupported() {
		return nil
	}
	// One decoding step for 2 … seqs sequences: the output head is
	// specialised on its row count.
	var passes [][]Row
	for k := 2; k <= min(seqs, m.maxBatch); k++ {
		var steps []Row
		for i := range k {
			steps = append(steps, Row{Pos: 0, Base: i * slotCtx, Step: true, Seq: i})
		}
		passes = append(passes, steps)
	}
	// A recurrent slot's own prompt pass binds its own state.
	if m.Recurrent() {
		for i := range seqs {
			passes = append(passes, []Row{{Pos: 0, Base: i * slotCtx, Seq: i}, {Pos: 1, Base: i * slotCtx, Seq: i}})
		}
	}
	// Prompts read beside another sequence: each warm-up batch size over
	// two sequences.
	for _, n := range w.WarmBatches() {
		half := n / 2
		if n > m.maxBatch || n-half > slotCtx || half < 1 {
			continue
		}
		var rows []Row
		for i := range n {
			seq, pos := 0, i
			if i >= half {
				seq, pos = 1, i-half
			}
			rows = append(rows, Row{Pos: pos, Base: seq * slotCtx, Seq: seq})
		}
		passes = append(passes, rows)
	}
	for _, rows := range passes {
		var outs []int
		for i, r := range rows {
			if i+1 == len(rows) || rows[i+1].Seq != r.Seq {
				outs = append(outs, i)
			}
		}
		if err := m.ForwardRows(rows, outs, make([]float32, len(outs)*m.Hparams.Vocab)); err != nil {
			return fmt.Errorf("warming passes over rows: %w", err)
		}
	}
	return nil
}
