package cpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
)

// BeginRows starts a pass whose rows belong to different sequences
// (infer.RowBackend): the ops that depend on a row's position (Rope,
// StoreKV, Attention) read it from the row instead of Pos+i.
func (b *Backend) BeginRows(rows []infer.Row) {
	b.rowTokens = b.rowTokens[:0]
	for _, r := range rows {
		b.rowTokens = append(b.rowTokens, r.Token)
	}
	b.Begin(infer.Batch{Tokens: b.rowTokens})
	b.rows = append(b.rows[:0], rows...)
	b.inRows = true
	b.steps = true
	for _, r := range rows {
		b.steps = b.steps && r.Step
	}
	for _, r := range rows {
		if r.Pos < 0 || r.Base < 0 {
			b.fail(fmt.Errorf("%w: row at position %d of the sequence at %d", infer.ErrBadShape, r.Pos, r.Base))
			return
		}
		if r.Base+r.Pos >= b.kv.spec.Context {
			b.fail(fmt.Errorf("%w: row at cache position %d past the cache's %d", infer.ErrContextFull, r.Base+r.Pos, b.kv.spec.Context))
			return
		}
	}
}

func (b *Backend) GatherRows(dst, src infer.Tensor, idx []int) {
	if !b.ok() {
		return
	}
	d, s := b.tensorOf("GatherRows", dst), b.tensorOf("GatherRows", src)
	if d == nil || s == nil {
		return
	}
	if d.cols != s.cols || d.rows < len(idx) || d == s {
		b.fail(fmt.Errorf("%w: GatherRows of %d rows of %s (%d×%d) into %s (%d×%d)", infer.ErrBadShape, len(idx), s.name, s.rows, s.cols, d.name, d.rows, d.cols))
		return
	}
	for j, i := range idx {
		if i < 0 || i >= b.active(s) {
			b.fail(fmt.Errorf("%w: GatherRows of row %d of %s, %d active", infer.ErrBadShape, i, s.name, b.active(s)))
			return
		}
		copy(d.row(j), s.row(i))
	}
}

// pos is row i's position in its sequence: RoPE's angle.
func (b *Backend) pos(i int) int {
	if b.inRows {
		return b.rows[i].Pos
	}
	return b.batch.Pos + i
}

// step says row i is a decoding step of its own (infer.Row.Step,
// infer.Batch.Steps).
func (b *Backend) step(i int) bool {
	if b.inRows {
		return b.rows[i].Step
	}
	return b.batch.Steps
}

// base is the first cache position of row i's sequence: attention sees
// base … base+pos(i).
func (b *Backend) base(i int) int {
	if b.inRows {
		return b.rows[i].Base
	}
	return 0
}

var (
	_ infer.RowBackend = (*Backend)(nil)
	_ infer.SeqStates  = (*Backend)(nil)
)
