package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// Passes over rows of several sequences (infer.RowBackend, infer.RowPasses).
//
// Rows of several sequences on a network without recurrent state run as
// one pass (OnePass): the matmuls read each weight once for all rows, and
// the kernels that place a row (RoPE, the K/V store, attention) read its
// position and its sequence's cache base from rowsBuf (flag ROWS,
// shaders/rows.wgsli), the cache bound whole.
//
// Otherwise ForwardRows runs each run of rows as a pass of its own, the
// one a pass of that sequence alone would be: the same kernels, so the
// same bits, with the K and V cache bound at the sequence's region
// (kvBind). A sequence's region then looks to every kernel as the cache
// from position 0 does, and its positions, RoPE angles and sliding window
// are the sequence's own. A lone decode step keeps the fused decode
// kernels this way.

// OnePass says rows of several sequences run as one pass: on a network
// without recurrent state, any rows on a Q8_0 cache, whose regions cannot
// be bound apart (RowPassesOK); elsewhere only where onePass is set (by
// tests), rows of more than one sequence (one sequence's run keeps the pass
// Forward gives it). On an H100 one pass over rows decoded slower than a
// pass per sequence (8B Q1_0, bench-serve: 2, 4 and 8 streams 0.51×,
// 0.72×, 0.87× of one stream, against 1.10× for 4 streams in passes per
// sequence; 27B qwen35: 4 and 8 streams 0.63×, 0.73×): the rows column's
// matmuls (q1_matmul) are prompt kernels that quantize the input in every
// workgroup, and read the weights slower at 2–8 rows than the decode
// matvecs do at one. Until a kernel for a few rows reads them at the
// matvecs' speed, several sequences' rows run a pass each. The recurrent ops
// step each sequence's run on its slot's state; a run of deltaChunkMin
// rows or more (a prompt's chunk) keeps the passes run by run, where it
// takes the chunked delta rule instead of a token at a time, and so do
// slots whose states a slab binding cannot hold (ensureSlabs).
func (b *Backend) OnePass(rows []infer.Row) bool {
	if b.kv == nil || len(rows) == 0 || b.runByRun {
		return false
	}
	if r := b.rec; r != nil && uint64(max(1, len(r.seqConv)))*b.slotStride(r.deltaFloats()) > b.d.Limits.MaxStorageBufferBindingSize {
		return false
	}
	if b.kv.spec.Quantized() && b.rec == nil {
		return true
	}
	if !b.onePass {
		return false
	}
	several, run := false, 1
	for i, r := range rows[1:] {
		if p := rows[i]; r.Base != p.Base || r.Seq != p.Seq {
			several, run = true, 0
		}
		if run++; b.rec != nil && run >= b.deltaChunkMin {
			return false
		}
	}
	return several
}

// seqRun is one recurrent state slot's rows in a pass over rows of
// several sequences: n rows from row0, the first at position pos.
type seqRun struct{ slot, row0, n, pos int }

// beginSeqRuns finds the runs of rows of each slot and writes each
// slot's uniform (conv.wgsl's and deltanet.wgsl's RUN); a pass over
// rows leaves no chained step to take back.
func (b *Backend) beginSeqRuns(rows []infer.Row) error {
	r := b.rec
	kept := max(1, len(r.seqConv))
	b.seqRuns = b.seqRuns[:0]
	for i, row := range rows {
		if row.Seq < 0 || row.Seq >= kept {
			return fmt.Errorf("gpu: row of sequence state %d, %d kept: %w", row.Seq, kept, infer.ErrBadShape)
		}
		if n := len(b.seqRuns); n > 0 && b.seqRuns[n-1].slot == row.Seq {
			b.seqRuns[n-1].n++
			continue
		}
		for _, run := range b.seqRuns {
			if run.slot == row.Seq {
				return fmt.Errorf("gpu: the rows of sequence state %d are not consecutive: %w", row.Seq, infer.ErrBadShape)
			}
		}
		b.seqRuns = append(b.seqRuns, seqRun{slot: row.Seq, row0: i, n: 1, pos: row.Pos})
	}
	for len(b.slotBatch) < kept {
		buf, err := b.d.newBuffer(fmt.Sprintf("batch of sequence %d", len(b.slotBatch)), 16, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst)
		if err != nil {
			return err
		}
		b.slotBatch = append(b.slotBatch, buf)
	}
	if err := b.ensureSlabs(kept); err != nil {
		return err
	}
	b.endPass()
	for _, run := range b.seqRuns {
		if !r.inSlab[run.slot] {
			b.copyState(run.slot, true)
			r.inSlab[run.slot] = true
		}
	}
	b.beginPass()
	for _, run := range b.seqRuns {
		var u [16]byte
		binary.LittleEndian.PutUint32(u[0:], uint32(run.n))
		binary.LittleEndian.PutUint32(u[4:], uint32(run.pos))
		binary.LittleEndian.PutUint32(u[8:], uint32(run.row0))
		if err := b.d.queue.WriteBuffer(b.slotBatch[run.slot], 0, u[:]); err != nil {
			return fmt.Errorf("gpu: writing a sequence's rows: %w", err)
		}
	}
	for l := range r.convBack {
		r.convBack[l], r.deltaBack[l] = false, false
	}
	return nil
}

// The slabs: a pass over rows of several sequences steps every slot's
// state in one buffer per layer (slot s's from s·stride), so that a step
// of one row per sequence is one dispatch of deltanet_in and one of
// deltanet_step (SLAB) however many sequences it holds; a pass of one
// sequence steps the slot's own buffers (useSeq). A slot's state is
// current in one of the two (inSlab) and is copied across when a pass of
// the other kind comes for it.

// slotStride is a slot's bytes in a slab for floats values: a storage
// binding's offset alignment.
func (b *Backend) slotStride(floats int) uint64 {
	a := b.kvAlign()
	return (uint64(4*floats) + a - 1) / a * a
}

// ensureSlabs makes the slabs of kept slots, once per NewSeqStates.
func (b *Backend) ensureSlabs(kept int) error {
	r := b.rec
	if r.slabConv != nil {
		return nil
	}
	r.convStride, r.deltaStride = b.slotStride(r.convFloats()), b.slotStride(r.deltaFloats())
	var conv, delta []*wgpu.Buffer
	for l := range r.conv {
		c, err := b.d.newBuffer(fmt.Sprintf("conv states %d", l), uint64(kept)*r.convStride, storageUsage)
		if err == nil {
			conv = append(conv, c)
			var d *wgpu.Buffer
			if d, err = b.d.newBuffer(fmt.Sprintf("delta states %d", l), uint64(kept)*r.deltaStride, storageUsage); err == nil {
				delta = append(delta, d)
			}
		}
		if err != nil {
			for _, buf := range append(conv, delta...) {
				buf.Release()
			}
			return err
		}
	}
	r.slabConv, r.slabDelta, r.inSlab = conv, delta, make([]bool, kept)
	return nil
}

// slabBinding is slot s's state of layer in slab.
func (b *Backend) slabBinding(slab []*wgpu.Buffer, stride uint64, layer, s int) binding {
	return binding{buf: slab[layer], offset: uint64(s) * stride, size: stride}
}

// copyState encodes the copy of slot s's state, every layer's, into the
// slabs (toSlab) or back to its own buffers, outside a compute pass.
func (b *Backend) copyState(s int, toSlab bool) {
	r := b.rec
	conv, delta := b.slotConv(s), b.slotDelta(s)
	cb, db := uint64(4*r.convFloats()), uint64(4*r.deltaFloats())
	for l := range conv {
		for _, c := range []struct {
			own, slab    *wgpu.Buffer
			stride, size uint64
		}{{conv[l], r.slabConv[l], r.convStride, cb}, {delta[l], r.slabDelta[l], r.deltaStride, db}} {
			if c.size == 0 {
				continue
			}
			var err error
			if toSlab {
				err = b.enc.CopyBufferToBuffer(c.own, 0, c.slab, uint64(s)*c.stride, c.size)
			} else {
				err = b.enc.CopyBufferToBuffer(c.slab, uint64(s)*c.stride, c.own, 0, c.size)
			}
			if err != nil {
				b.fail(fmt.Errorf("gpu: copying a sequence's recurrent state: %w", err))
				return
			}
		}
	}
}

// ownState brings the state of the pass's slot back from the slabs at
// the start of a pass of one sequence (its encoder open).
func (b *Backend) ownState() {
	r := b.rec
	if r == nil || b.rows || r.inSlab == nil || !r.inSlab[r.cur] || b.err != nil {
		return
	}
	b.endPass()
	b.copyState(r.cur, false)
	b.beginPass()
	r.inSlab[r.cur] = false
}

// ownStateNow is ownState between passes (ReadRecurrentState): the copy
// is submitted alone, ahead of what reads the state.
func (b *Backend) ownStateNow() error {
	r := b.rec
	if r == nil || r.inSlab == nil || !r.inSlab[r.cur] {
		return nil
	}
	enc, err := b.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err)
	}
	b.enc = enc
	b.copyState(r.cur, false)
	b.enc = nil
	if err := b.err; err != nil {
		b.err = nil
		enc.Release()
		return err
	}
	cmd, err := enc.Finish(nil)
	enc.Release()
	if err != nil {
		return fmt.Errorf("gpu: copying a sequence's recurrent state: %w", err)
	}
	b.d.queue.Submit(cmd)
	cmd.Release()
	r.inSlab[r.cur] = false
	return nil
}

// oneRowRuns says each sequence of the pass over rows has one row (a
// decoding step of each).
func (b *Backend) oneRowRuns() bool {
	for _, run := range b.seqRuns {
		if run.n != 1 {
			return false
		}
	}
	return len(b.seqRuns) > 0
}

// slotConv and slotDelta are slot s's layers' state buffers.
func (b *Backend) slotConv(s int) []*wgpu.Buffer {
	if r := b.rec; s != r.cur {
		return r.seqConv[s]
	}
	return b.rec.conv
}

func (b *Backend) slotDelta(s int) []*wgpu.Buffer {
	if r := b.rec; s != r.cur {
		return r.seqDelta[s]
	}
	return b.rec.delta
}

// rowTokens is rows' tokens in an array reused pass to pass (Begin
// copies them to the device, Embed reads them while the pass is encoded).
func (b *Backend) rowTokens(rows []infer.Row) []int32 {
	toks := b.rowToks[:0]
	for _, r := range rows {
		toks = append(toks, r.Token)
	}
	b.rowToks = toks
	return toks
}

// BeginRows starts a pass over rows: of several sequences where OnePass
// takes them, else of one sequence at consecutive positions in its region
// of the cache (infer.RowPasses), the kernels seeing the cache from
// rows[0].Base.
func (b *Backend) BeginRows(rows []infer.Row) {
	if b.OnePass(rows) {
		b.beginOnePass(rows)
		return
	}
	toks := b.rowTokens(rows)
	var base int
	if len(rows) > 0 {
		base = rows[0].Base
	}
	b.nextBase = base
	var seqErr error
	if b.rec != nil && len(rows) > 0 {
		if seq, kept := rows[0].Seq, max(1, len(b.rec.seqConv)); seq >= 0 && seq < kept {
			b.nextSeq = seq
		} else {
			seqErr = fmt.Errorf("gpu: row of sequence state %d, %d kept: %w", seq, kept, infer.ErrBadShape)
		}
	}
	b.chain.fromDevice = false
	b.Begin(infer.Batch{Tokens: toks, Pos: rowPos(rows), Steps: len(rows) == 1 && rows[0].Step})
	if b.err != nil {
		return
	}
	if seqErr != nil {
		b.fail(seqErr)
		return
	}
	for i, r := range rows {
		if r.Base != base || r.Seq != rows[0].Seq || r.Pos != rows[0].Pos+i || r.Pos < 0 || r.Base < 0 {
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

// beginOnePass starts a pass over rows of several sequences: each row's
// position, base and state slot go to rowsBuf for the kernels that place
// it.
func (b *Backend) beginOnePass(rows []infer.Row) {
	var rowErr error
	words := b.rowWords[:0]
	longest := 0
	for i, r := range rows {
		if r.Pos < 0 || r.Base < 0 || r.Base+r.Pos >= b.kv.spec.Context {
			rowErr = fmt.Errorf("gpu: row %d at cache position %d past the %d-token cache: %w", i, r.Base+r.Pos, b.kv.spec.Context, infer.ErrContextFull)
			break
		}
		for _, w := range []int{r.Pos, r.Base, r.Seq, 0} {
			words = binary.LittleEndian.AppendUint32(words, uint32(w))
		}
		longest = max(longest, r.Pos+1)
	}
	b.rowWords = words
	b.chain.fromDevice = false
	b.nextRows, b.nextSeqLen = true, longest
	b.Begin(infer.Batch{Tokens: b.rowTokens(rows)})
	if b.err != nil {
		return
	}
	if rowErr != nil {
		b.fail(rowErr)
		return
	}
	if err := b.d.queue.WriteBuffer(b.rowsBuf, 0, words); err != nil {
		b.fail(fmt.Errorf("gpu: writing the rows' positions: %w", err))
		return
	}
	if b.rec != nil {
		if err := b.beginSeqRuns(rows); err != nil {
			b.fail(err)
		}
	}
}

// rowsKey marks key as a pass over rows of several sequences' (its
// kernel reads rowsBuf) where the pass is one.
func (b *Backend) rowsKey(key opKey) opKey {
	if b.rows {
		key.v |= keyRows
	}
	return key
}

// withRows adds, in a pass over rows of several sequences, the ROWS flag
// to a placing kernel's defs and rowsBuf to its bindings.
func (b *Backend) withRows(defs map[string]shaders.Const, bufs []binding) []binding {
	if !b.rows {
		return bufs
	}
	defs["ROWS"] = shaders.Flag(true)
	return append(bufs, at(15, whole(b.rowsBuf)))
}

// BeginRuns starts the passes of one ForwardRows: each submits without
// waiting, so the GPU runs one while the host encodes the next, and their
// reads complete at EndRuns.
func (b *Backend) BeginRuns() { b.runs = true }

// EndRuns waits for the passes since BeginRuns and completes their reads.
func (b *Backend) EndRuns() error {
	b.runs = false
	if len(b.heldReads) == 0 {
		return nil
	}
	defer func() {
		b.heldReads = b.heldReads[:0]
		for _, t := range b.touched {
			t.passReads = 0
		}
		b.touched = b.touched[:0]
	}()
	if err := waitIdle(b.d.dev); err != nil {
		return err
	}
	return b.mapReads(b.heldReads)
}

// rowPos is the first row's position (0 for none: Begin fails on it).
func rowPos(rows []infer.Row) int {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Pos
}

// RowPassesOK says passes over rows can run: a sequence's region of the
// cache can be bound as a cache of its own where each position's K and V
// are contiguous (f16, not Q8_0, whose block scales lie after every
// position's values); on a Q8_0 cache every pass over rows is one pass
// (OnePass), which a network with recurrent state cannot take.
func (b *Backend) RowPassesOK() bool {
	return b.kv != nil && (!b.kv.spec.Quantized() || b.rec == nil)
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

// NewSeqStates keeps n recurrent states (infer.SeqStates): slot 0 the
// present one, the others zero. A pass runs on its rows' slot: BeginRows
// puts that slot's buffers in place of the state's (no copy; the ops bind
// the state's buffers, so each slot's have their own), Begin slot 0's.
func (b *Backend) NewSeqStates(n int) error {
	if b.enc != nil {
		return errInPass
	}
	if n < 1 {
		return fmt.Errorf("gpu: %d sequence states: %w", n, infer.ErrBadShape)
	}
	r := b.rec
	if r == nil {
		return nil
	}
	b.useSeq(0)
	if err := b.ownStateNow(); err != nil {
		return err
	}
	old := append(append([]*wgpu.Buffer(nil), r.slabConv...), r.slabDelta...)
	r.slabConv, r.slabDelta, r.inSlab = nil, nil, nil
	for s := range r.seqConv {
		old = append(append(old, r.seqConv[s]...), r.seqDelta[s]...)
	}
	b.dropOps(old...)
	for _, buf := range old {
		buf.Release()
	}
	r.seqConv, r.seqDelta = make([][]*wgpu.Buffer, n), make([][]*wgpu.Buffer, n)
	for s := 1; s < n; s++ {
		for l := range r.conv {
			c, err := b.d.newBuffer(fmt.Sprintf("conv state %d of sequence %d", l, s), r.conv[l].GetSize(), storageUsage)
			if err == nil {
				r.seqConv[s] = append(r.seqConv[s], c)
				var d *wgpu.Buffer
				if d, err = b.d.newBuffer(fmt.Sprintf("delta state %d of sequence %d", l, s), r.delta[l].GetSize(), storageUsage); err == nil {
					r.seqDelta[s] = append(r.seqDelta[s], d)
				}
			}
			if err != nil {
				for t := range r.seqConv {
					for _, buf := range append(r.seqConv[t], r.seqDelta[t]...) {
						buf.Release()
					}
				}
				r.seqConv, r.seqDelta = nil, nil
				return err
			}
		}
	}
	return nil
}

// useSeq puts slot s's state in place (between passes): the buffers of
// the slot in place go back to it.
func (b *Backend) useSeq(s int) {
	r := b.rec
	if r == nil || s == r.cur || s >= len(r.seqConv) {
		return
	}
	r.seqConv[r.cur], r.seqDelta[r.cur] = r.conv, r.delta
	r.conv, r.delta = r.seqConv[s], r.seqDelta[s]
	r.seqConv[s], r.seqDelta[s] = nil, nil
	r.cur = s
	// the twins hold no earlier step of this slot
	for l := range r.convBack {
		r.convBack[l], r.deltaBack[l] = false, false
	}
}

var (
	_ infer.RowBackend = (*Backend)(nil)
	_ infer.RowPasses  = (*Backend)(nil)
	_ infer.SeqStates  = (*Backend)(nil)
)
