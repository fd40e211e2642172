package gpu

import (
	"errors"
	"fmt"

	"github.com/bonsai-chat/bonsai/shaders"
)

// The decode Q1_0 matvecs: a group of up to three matrices on one x (fuse
// joins them), encoded as one dispatch of the first kernel that takes it.

// matvecKernel is a decode Q1_0 matvec kernel: run encodes the group and
// reports true, or reports false, encoding nothing, where the kernel
// cannot take the group or (unless forced) another measured faster.
type matvecKernel struct {
	name string
	run  func(b *Backend, c *matvecCall, forced bool) bool
}

// matvecKernels are the decode Q1_0 matvec kernels in the order
// encodeMatVec tries them (the decode column of the Q1_0 row of the
// kernel table, layouts.go): q1_xq on a row its producer rounded, else on
// x as it is q1_w1 for up to w1MaxRows rows, q1_popc for big matrices,
// q1_matvec for the rest.
var matvecKernels = []matvecKernel{
	{"q1_xq", func(b *Backend, c *matvecCall, _ bool) bool { return c.xq && b.dispatchXQ(c) }},
	{"q1_w1", w1MatVec},
	{"q1_popc", popcMatVec},
	{"q1_matvec", func(b *Backend, c *matvecCall, _ bool) bool { return !c.glu && b.dispatchMatVec(c, "q1_matvec") }},
}

// encodeMatVec encodes a matvec group as one dispatch of the first of
// matvecKernels that takes it (b.forceMatVec first, where a test names
// one).
func (b *Backend) encodeMatVec(g *matvecGroup) {
	if b.err != nil {
		return
	}
	c := b.matvecCall(g)
	if n := c.rows(b.n); n > 1 {
		b.rowsMatVec(&c, n)
		return
	}
	for _, k := range matvecKernels {
		if k.name == b.forceMatVec && k.run(b, &c, true) {
			return
		}
	}
	for _, k := range matvecKernels {
		if k.run(b, &c, false) {
			return
		}
	}
	if c.glu {
		b.fail(errors.New("gpu: SwiGLU was left to a matvec that cannot compute it"))
		return
	}
	b.fail(fmt.Errorf("gpu: no decode matvec kernel takes %d rows of %d: %w", c.total, c.ps[0].w.k, ErrUnsupported))
}

// pendingMatMul is one matrix of a matvec group and its output.
type pendingMatMul struct {
	dst *tensor
	w   *weight
}

// matvecCall is a decode matvec group as its kernels take it.
type matvecCall struct {
	key opKey
	ps  []pendingMatMul
	// ends are the matrices' running row totals, total the last
	ends         []int
	total        int
	words, wg    int
	bits, scales span
	// x is the group's input; src what the kernel loads (x, or the fused
	// input's operand); resid the tensor the output is added into
	x, src, resid *tensor
	// xq: x's producer wrote its Q8_0 rounding and table; glu: the group
	// is gate/up with SwiGLU as its epilogue
	xq, glu bool
	// in is the value computed in the x load (a SwiGLU), its bindings
	// fused and its constants defs
	in    value
	fused []binding
	defs  map[string]shaders.Const
}

// matvecCall gathers group g's matrices, input and output.
func (b *Backend) matvecCall(g *matvecGroup) matvecCall {
	ps := b.mvs[:0]
	for i := range g.n {
		ps = append(ps, pendingMatMul{dst: g.dst[i], w: g.w[i]})
	}
	b.mvs = ps
	c := matvecCall{ps: ps, x: g.x, src: g.x, resid: g.resid, in: g.in, glu: g.glu, defs: map[string]shaders.Const{}}
	// x's producer wrote its values and their Q8_0 rounding
	c.xq = c.in.kind == vRounded
	if c.xq {
		c.in = value{}
	}
	w0 := ps[0].w
	c.words = w0.k / 32
	c.wg = 64
	if c.words >= 256 {
		c.wg = 128
	}
	key := &c.key
	key.kind, key.a, key.b, key.i = "q1mv", c.x, w0, len(ps)
	c.bits, c.scales = w0.bits, w0.scales
	for i, p := range ps {
		c.total += p.w.m
		c.ends = append(c.ends, c.total)
		if i > 0 {
			c.bits.size += p.w.bits.size
			c.scales.size += p.w.scales.size
		}
	}
	key.c = ps[0].dst
	if c.resid != nil {
		key.kind, key.d = "q1mvadd", c.resid
	}
	// A SwiGLU computed in the x load binds its operands instead of x.
	if in := c.in; in.kind == vSwiGLU {
		c.src = in.src
		key.a = c.src
		key.v |= keyGLUIn
		key.g = in.up
		c.defs["GLU"] = shaders.Flag(true)
		c.fused = []binding{at(6, whole(in.up.buf))}
	}
	if len(ps) > 1 {
		key.d = ps[1].dst
	}
	if len(ps) > 2 {
		key.e = ps[2].dst
	}
	return c
}

// rows is the rows the group computes in a pass of n: as many as its x
// and every output hold.
func (c *matvecCall) rows(n int) int {
	n = min(n, c.x.rows)
	for _, p := range c.ps {
		n = min(n, p.dst.rows)
	}
	if c.resid != nil {
		n = min(n, c.resid.rows)
	}
	return n
}

// rowsMatVec encodes a group over n > 1 rows (a pass over rows of
// several sequences, a short verify) as one q1_matmul dispatch, which
// reads each weight once for up to 8 rows and routes the matrices'
// outputs (and the residual add) as the decode matvecs do. fuse computes
// a group's input before it outside a one-token pass, so x is as it is.
func (b *Backend) rowsMatVec(c *matvecCall, n int) {
	if c.glu || c.in.kind != 0 {
		b.fail(errors.New("gpu: a fused input or epilogue was left to a matvec over rows"))
		return
	}
	w0 := c.ps[0].w
	rpw, tt, wg := matmulShape(false)
	words := w0.k / 32
	if words < wg {
		wg = 32
		for wg*2 <= words && wg < 128 {
			wg *= 2
		}
	}
	for !rowsIn(c.ends, rpw) {
		rpw /= 2
	}
	key := c.key
	key.kind = "q1mmrows"
	o := b.prepared(key, func() (*kernel, []binding, error) {
		defs := c.withDefs(map[string]shaders.Const{
			"K": shaders.U32(w0.k), "M": shaders.U32(c.total), "WORDS": shaders.U32(words), "RPW": shaders.U32(rpw),
			"TT": shaders.U32(tt), "WG": shaders.U32(wg), "XROWS": shaders.U32(c.x.rows),
			"ACC": shaders.U32(rpw * tt), "RED": shaders.U32(wg * rpw * tt), "GROUP": shaders.Flag(true),
			"M0": shaders.U32(c.ends[0]), "M1": shaders.U32(c.ends[min(1, len(c.ends)-1)]),
			"OUT2": shaders.Flag(len(c.ps) > 1), "OUT3": shaders.Flag(len(c.ps) > 2), "ADD": shaders.Flag(c.resid != nil)})
		bufs := []binding{whole(b.batchBuf), c.bits.binding(), c.scales.binding(), whole(c.x.buf)}
		for i, p := range c.ps {
			bufs = append(bufs, at(uint32(4+i), whole(p.dst.buf)))
		}
		if c.resid != nil {
			bufs = append(bufs, at(7, whole(c.resid.buf)))
		}
		k, err := b.d.kernel("q1_matmul", defs)
		return k, bufs, err
	})
	b.dispatch(o, c.total/rpw, ceilDiv(n, tt), 1)
}

// withDefs adds the fused input's constants and the Q1_0 layout to m.
func (c *matvecCall) withDefs(m map[string]shaders.Const) map[string]shaders.Const {
	for k, v := range c.defs {
		m[k] = v
	}
	return q1Layout(m, c.ps[0].w.interleaved, c.ends...)
}

// dispatchXQ encodes the group on x's Q8_0 rounding as one q1_xq
// dispatch, with the SwiGLU epilogue for glu (gate, up); it reports
// false, encoding nothing, when q1_xq cannot take the shape.
func (b *Backend) dispatchXQ(c *matvecCall) bool {
	ps, ends, x, resid, glu := c.ps, c.ends, c.x, c.resid, c.glu
	w0 := ps[0].w
	if w0.k%128 != 0 || !w0.interleaved || x.xtab == nil {
		return false
	}
	rpw, ks, wg, ok := b.xqShape(w0.k/128, ends, glu)
	if !ok {
		return false
	}
	key := c.key
	key.v |= keyXQ
	groups := c.total / rpw
	h := ps[0].dst
	if glu {
		key.v |= keyXQGLU
		groups = w0.m / 32
		if err := b.xqBuffers(h); err != nil {
			b.fail(err)
			return true
		}
	}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		defs := q1Layout(map[string]shaders.Const{
			"K": shaders.U32(w0.k), "NB": shaders.U32(w0.k / 128), "RPW": shaders.U32(rpw), "KS": shaders.U32(ks),
			"WG": shaders.U32(wg), "M0": shaders.U32(ends[0]), "M1": shaders.U32(ends[min(1, len(ends)-1)]), "GLU": shaders.Flag(glu),
			"OUT2": shaders.Flag(len(ps) > 1), "OUT3": shaders.Flag(len(ps) > 2), "ADD": shaders.Flag(resid != nil),
			"TAB": shaders.Flag(true)}, true, ends...) // q8_group's table, for the GLU epilogue
		k, err := b.d.kernel("q1_xq", defs)
		bufs := []binding{c.bits.binding(), c.scales.binding(), whole(x.xtab)}
		for i, p := range ps {
			bufs = append(bufs, at(uint32(4+i), whole(p.dst.buf)))
		}
		if resid != nil {
			bufs = append(bufs, at(7, whole(resid.buf)))
		}
		if glu {
			bufs = append(bufs, at(8, whole(h.xq)), at(9, whole(h.xqSum)), at(10, whole(h.xtab)))
		}
		return k, bufs, err
	})
	b.dispatch(o, groups, 1, 1)
	return true
}

// xqShape is q1_xq's workgroup for matrices of K = 128·nb ending at
// ends: rpw rows × ks slices of K in wg threads. Without glu ks is the
// most slices (≤ 32) that still give every thread a block, and every
// matrix's rows must be a multiple of rpw; with glu (gate, up) the
// workgroup is 32 rows of each.
func (b *Backend) xqShape(nb int, ends []int, glu bool) (rpw, ks, wg int, ok bool) {
	if glu {
		wg = b.xqGLUThreads()
		return 64, wg / 64, wg, ends[0]%32 == 0 && wg >= 64
	}
	ks = 8
	for ks < 32 && 2*ks <= nb {
		ks *= 2
	}
	for ; ks <= 32; ks *= 2 {
		if rpw = 256 / ks; rowsIn(ends, rpw) {
			return rpw, ks, 256, true
		}
	}
	return 0, 0, 0, false
}

// xqGLUThreads is the workgroup size of q1_xq's SwiGLU epilogue: 512
// threads where the device grants them.
func (b *Backend) xqGLUThreads() int {
	return min(512, int(b.d.Limits.MaxComputeInvocationsPerWorkgroup))
}

// rowsIn reports whether every matrix of a group ending at ends (running
// totals of rows) has a multiple of rpw rows.
func rowsIn(ends []int, rpw int) bool {
	for _, e := range ends {
		if e%rpw != 0 {
			return false
		}
	}
	return true
}

// xqOK reports whether decode activations are rounded to Q8_0 once by
// their producer, with the rounded row's lookup table, for q1_xq: always
// but in the unfused or unrounded passes tests compare against.
func (b *Backend) xqOK() bool { return !b.noFuse && !b.noRounded }

// xqBuffers gives t the buffers of its Q8_0 rounding.
func (b *Backend) xqBuffers(t *tensor) error {
	if t.xq != nil {
		return nil
	}
	q, err := b.d.newBuffer(t.name+".xq", uint64(t.rows*t.cols*4), storageUsage)
	if err != nil {
		return err
	}
	sum, err := b.d.newBuffer(t.name+".xqsum", uint64(max(4, t.rows*t.cols/32*4)), storageUsage)
	if err != nil {
		q.Release()
		return err
	}
	t.xq, t.xqSum = q, sum
	// decode rounds one row; its table is 16 values per 4
	if t.xtab, err = b.d.newBuffer(t.name+".xtab", uint64(t.cols*16), storageUsage); err != nil {
		return err
	}
	return nil
}

// tabOut is the producer's binding of t's lookup table at slot, and its
// TAB flag (shaders/q8_tab.wgsli: a word's 32 weights are eight table
// entries instead of 32 tested adds, the same bits; on the H200 it took
// 8B decoding from 358 to 427 tok/s).
func (b *Backend) tabOut(t *tensor, slot uint32, defs map[string]shaders.Const, bufs []binding) []binding {
	defs["TAB"] = shaders.Flag(true)
	return append(bufs, at(slot, whole(t.xtab)))
}

// w1MaxRows is the most rows (all of a group's matrices) q1_w1 is
// preferred for.
const w1MaxRows = 8192

// w1MatVec runs q1_w1 on x as it is. On the H200 it beat q1_matvec on
// the 8B's q/k/v (6144 rows) and output projection (4096) but lost to
// q1_popc on gate/up (24576), on the down projection with SwiGLU in its
// x load, and on the head: each workgroup quantizes all of x again, which
// the small matrices amortize over few workgroups and the big ones do not
// (q1_xq, on a row its producer rounded once, does not).
func w1MatVec(b *Backend, c *matvecCall, forced bool) bool {
	if c.glu || !c.ps[0].w.interleaved || !forced && (c.total > w1MaxRows || c.in.kind == vSwiGLU) {
		return false
	}
	cfg, ok := b.w1Config(c.ps[0].w.k, c.ends)
	if !ok {
		return false
	}
	b.dispatchW1(c, cfg)
	return true
}

// w1 is q1_w1's shape: RPW rows × KS slices of K per workgroup, the
// activations quantized CB blocks at a time.
type w1 struct{ rpw, ks, cb int }

// w1Config picks q1_w1's shape for K and the row ends of the matrices
// (each a multiple of RPW rows): the most rows per workgroup whose KS
// slices divide a chunk of blocks that fits workgroup memory.
func (b *Backend) w1Config(k int, ends []int) (w1, bool) {
	nb := k / 128
	limit := min(int(b.d.Limits.MaxComputeWorkgroupStorageSize), 32<<10)
	for _, rpw := range []int{32, 16, 8} {
		ks := 256 / rpw
		fits := k%128 == 0
		prev := 0
		for _, e := range ends {
			fits = fits && (e-prev)%rpw == 0
			prev = e
		}
		if !fits {
			continue
		}
		for cb := min(nb, 48) / ks * ks; cb >= ks; cb -= ks {
			if nb%cb == 0 && cb*(512+16)+256*16 <= limit {
				return w1{rpw: rpw, ks: ks, cb: cb}, true
			}
		}
	}
	return w1{}, false
}

// dispatchW1 encodes the group as one q1_w1 dispatch of shape cfg.
func (b *Backend) dispatchW1(c *matvecCall, cfg w1) {
	w0 := c.ps[0].w
	key := c.key
	key.v |= keyW1
	o := b.prepared(key, func() (*kernel, []binding, error) {
		defs := c.withDefs(map[string]shaders.Const{})
		for k, v := range map[string]shaders.Const{
			"K": shaders.U32(w0.k), "NB": shaders.U32(w0.k / 128), "RPW": shaders.U32(cfg.rpw), "KS": shaders.U32(cfg.ks),
			"CB": shaders.U32(cfg.cb), "XS": shaders.U32(cfg.cb * 32), "XSUM": shaders.U32(cfg.cb * 4), "WG": shaders.U32(256),
			"RED": shaders.U32(256), "M0": defs["Q1M0"], "M1": defs["Q1M1"], "W1": shaders.Flag(true),
			"OUT2": shaders.Flag(len(c.ps) > 1), "OUT3": shaders.Flag(len(c.ps) > 2), "ADD": shaders.Flag(c.resid != nil)} {
			defs[k] = v
		}
		k, err := b.d.kernel("q1_w1", defs)
		return k, matVecBindings(c), err
	})
	b.dispatch(o, c.total/cfg.rpw, 1, 1)
}

// popcMinWeights is where a decode matvec on an unrounded x moves from
// q1_matvec to q1_popc: on the H200 q1_popc was 20–25 % faster on
// 12288×4096 and 4096×12288 matvecs and ~4 % slower on the 6144×4096
// fused q/k/v.
const popcMinWeights = 32 << 20

// popcMatVec runs q1_popc (16 rows per workgroup) on x as it is, for
// matrices of popcMinWeights weights and more.
func popcMatVec(b *Backend, c *matvecCall, forced bool) bool {
	if c.glu || c.total%16 != 0 || !forced && c.total*c.ps[0].w.k < popcMinWeights {
		return false
	}
	return b.dispatchMatVec(c, "q1_popc")
}

// dispatchMatVec encodes the group as one dispatch of q1_matvec (8 rows
// per workgroup) or q1_popc (16, in 4 row groups).
func (b *Backend) dispatchMatVec(c *matvecCall, name string) bool {
	key, perWG, red := c.key, 8, 2*c.wg
	if name == "q1_popc" {
		key.i += 16
		perWG, red = 16, 4*c.wg
	}
	w0 := c.ps[0].w
	o := b.prepared(key, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"K": shaders.U32(w0.k), "WORDS": shaders.U32(c.words), "WG": shaders.U32(c.wg), "RED": shaders.U32(red),
			"M0": shaders.U32(c.ends[0]), "M1": shaders.U32(c.ends[min(1, len(c.ends)-1)]),
			"OUT2": shaders.Flag(len(c.ps) > 1), "OUT3": shaders.Flag(len(c.ps) > 2), "ADD": shaders.Flag(c.resid != nil)}
		if name == "q1_popc" {
			defs["RG"] = shaders.U32(4)
		}
		k, err := b.d.kernel(name, c.withDefs(defs))
		return k, matVecBindings(c), err
	})
	b.dispatch(o, c.total/perWG, 1, 1)
	return true
}

// matVecBindings are the bindings of the decode matvecs that take x as it
// is (q1_w1, q1_matvec, q1_popc): the weights' words and scales, x, each
// matrix's output, the residual it adds into, then those of the fused
// input.
func matVecBindings(c *matvecCall) []binding {
	bufs := []binding{c.bits.binding(), c.scales.binding(), whole(c.src.buf)}
	for _, p := range c.ps {
		bufs = append(bufs, whole(p.dst.buf))
	}
	if c.resid != nil {
		bufs = append(bufs, whole(c.resid.buf))
	}
	return append(bufs, c.fused...)
}
