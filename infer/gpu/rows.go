package gpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
)

// Passes over rows of several sequences (infer.RowBackend, infer.RowPasses).
// The kernels take one sequence's consecutive rows per pass, so ForwardRows
// runs each run of rows as a pass of its own, the one a pass of that
// sequence alone would be: the same kernels, so the same bits, with the K
// and V cache bound at the sequence's region (kvBind). A sequence's region
// then looks to every kernel as the cache from position 0 does, and its
// positions, RoPE angles and sliding window are the sequence's own.

// BeginRows starts a pass over rows of one sequence at consecutive
// positions in its region of the cache (infer.RowPasses): the kernels see
// the cache from rows[0].Base.
func (b *Backend) BeginRows(rows []infer.Row) {
	toks := make([]int32, len(rows))
	for i, r := range rows {
		toks[i] = r.Token
	}
	var base int
	if len(rows) > 0 {
		base = rows[0].Base
	}
	b.nextBase = base
	b.chain.fromDevice = false
	b.Begin(infer.Batch{Tokens: toks, Pos: rowPos(rows), Steps: len(rows) == 1 && rows[0].Step})
	if b.err != nil {
		return
	}
	for i, r := range rows {
		if r.Base != base || r.Pos != rows[0].Pos+i || r.Pos < 0 || r.Base < 0 {
			b.fail(fmt.Errorf("gpu: a pass over rows of several sequences or positions out of order (row %d at %d of the sequence at %d): %w", i, r.Pos, r.Base, infer.ErrUnsupportedOp))
			return
		}
	}
	if b.kv == nil {
		return
	}
	if last := rows[len(rows)-1]; last.Base+last.Pos >= b.kv.spec.Context {
		b.fail(fmt.Errorf("gpu: row at cache position %d past the %d-token cache: %w", last.Base+last.Pos, b.kv.spec.Context, infer.ErrContextFull))
		return
	}
	if !b.RowPassesOK() || b.kvShift(base)%b.kvAlign() != 0 {
		b.fail(fmt.Errorf("gpu: a sequence at cache position %d: its region cannot be bound (%d-byte alignment, %s cache): %w", base, b.kvAlign(), b.kv.spec.K, infer.ErrUnsupportedOp))
	}
}

// rowPos is the first row's position (0 for none: Begin fails on it).
func rowPos(rows []infer.Row) int {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Pos
}

// RowPassesOK says a sequence's region of the cache can be bound as a
// cache of its own: where each position's K and V are contiguous (f16,
// not Q8_0, whose block scales lie after every position's values).
func (b *Backend) RowPassesOK() bool {
	return b.kv != nil && !b.kv.spec.Quantized()
}

// kvShift is the bytes before position base in a layer's f16 K or V.
func (b *Backend) kvShift(base int) uint64 {
	s := b.kv.spec
	return uint64(base) * uint64(s.KVHeads*s.HeadDim) * 2
}

// kvAlign is the alignment of a storage binding's offset.
func (b *Backend) kvAlign() uint64 {
	return uint64(max(256, b.d.Limits.MinStorageBufferOffsetAlignment))
}

// GatherRows copies rows idx of src into dst's first rows.
func (b *Backend) GatherRows(dstT, srcT infer.Tensor, idx []int) {
	if !b.ready() {
		return
	}
	dst, src := b.tensorArg("GatherRows dst", dstT), b.tensorArg("GatherRows src", srcT)
	if dst == nil || src == nil {
		return
	}
	if dst.cols != src.cols || dst.rows < len(idx) || dst == src {
		b.shapeErr("GatherRows of %d rows of %s (%d×%d) into %s (%d×%d)", len(idx), src.name, src.rows, src.cols, dst.name, dst.rows, dst.cols)
		return
	}
	for _, i := range idx {
		if i < 0 || i >= b.active(src) {
			b.shapeErr("GatherRows of row %d of %s, %d active", i, src.name, b.active(src))
			return
		}
	}
	if b.rounded.x == dst {
		b.rounded.x = nil
	}
	b.endPass()
	row := uint64(4 * src.cols)
	for j, i := range idx {
		if err := b.enc.CopyBufferToBuffer(src.buf, uint64(i)*row, dst.buf, uint64(j)*row, row); err != nil {
			b.fail(fmt.Errorf("gpu: gathering rows: %w", err))
			break
		}
	}
	b.beginPass()
}

var (
	_ infer.RowBackend = (*Backend)(nil)
	_ infer.RowPasses  = (*Backend)(nil)
)
