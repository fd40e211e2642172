package cpu

import (
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

func (b *Backend) Embed(dst infer.Tensor, w infer.Weight) {
	if !b.ok() {
		return
	}
	d, cw := b.tensorOf("Embed", dst), b.weightOf("Embed", w)
	if d == nil || cw == nil {
		return
	}
	if cw.cols != d.cols || d.rows < b.n {
		b.fail(fmt.Errorf("%w: Embed of %s (%v) into %s (%d×%d) for %d tokens", infer.ErrBadShape, cw.name, cw.shape, d.name, d.rows, d.cols, b.n))
		return
	}
	for i, id := range b.batch.Tokens {
		if id < 0 || int(id) >= cw.rows {
			b.fail(fmt.Errorf("%w: token %d outside the %d rows of %s", infer.ErrBadShape, id, cw.rows, cw.name))
			return
		}
		if err := quant.DequantizeRow(cw.typ, cw.row(int(id)), d.row(i)); err != nil {
			b.fail(fmt.Errorf("Embed %s: %w", cw.name, err))
			return
		}
	}
}

// MatMul defers the product: products that read the same input (Q, K and
// V; gate and up) are queued and run as one pool dispatch when the next
// other op (or a product with another input) flushes them, which saves a
// wake-up and a wait of every worker per product.
func (b *Backend) MatMul(dst infer.Tensor, w infer.Weight, x infer.Tensor) {
	quantized := b.actOf // check forgets it; a MatMul may reuse it
	if cx, _ := x.(*tensor); cx == nil || cx != b.pendingX || len(b.pending) == cap(b.pending) {
		b.flush()
	}
	if !b.check() {
		return
	}
	d, cw, cx := b.tensorOf("MatMul", dst), b.weightOf("MatMul", w), b.tensorOf("MatMul", x)
	if d == nil || cw == nil || cx == nil {
		return
	}
	rows := b.active(cx)
	if cw.cols != cx.cols || cw.rows != d.cols || b.active(d) != rows || d == cx {
		b.fail(fmt.Errorf("%w: MatMul %s (%v) · %s (%d×%d) → %s (%d×%d)", infer.ErrBadShape, cw.name, cw.shape, cx.name, cx.rows, cx.cols, d.name, d.rows, d.cols))
		return
	}
	if cw.mat == nil {
		b.fail(fmt.Errorf("%w: MatMul by %s, a vector", infer.ErrBadShape, cw.name))
		return
	}
	for _, q := range b.pendingOf[:len(b.pending)] {
		if q.dst == d { // two products into one tensor: keep their order
			b.flush()
			break
		}
	}
	x32, y := cx.data[:rows*cx.cols], d.data[:rows*d.cols]
	// Q, K and V (and gate and up) read the same input: quantize it once.
	if quantized != cx || !b.act.QuantizedFor(cw.typ) || b.act.Tokens != rows {
		b.flush() // the queued products still need the old activations
		if !b.ok() {
			return
		}
		if err := b.qpool.Quantize(&b.act, cw.typ, x32, cx.cols, rows); err != nil {
			b.fail(fmt.Errorf("MatMul %s: %w", cw.name, err))
			return
		}
	}
	b.act.Steps = b.steps
	b.actOf, b.pendingX = cx, cx
	b.pendingOf[len(b.pending)] = pendingProduct{dst: d, w: cw}
	b.pending = append(b.pending, quant.Product{M: cw.mat, Y: y})
}

// pendingProduct says which tensors a queued product involves.
type pendingProduct struct {
	dst *tensor
	w   *weight
}

// flush runs the queued products.
func (b *Backend) flush() {
	if len(b.pending) == 0 {
		return
	}
	ps := b.pending
	b.pending, b.pendingX = b.pending[:0], nil
	if b.err != nil {
		return
	}
	if err := b.qpool.MatMuls(ps, &b.act); err != nil {
		b.fail(fmt.Errorf("MatMul %s (and %d more sharing its input): %w", b.pendingOf[0].w.name, len(ps)-1, err))
	}
	clear(ps) // drop references to the outputs
}

func (b *Backend) RMSNorm(dst, x infer.Tensor, w infer.Weight, eps float32) {
	if !b.ok() {
		return
	}
	d, cx, cw := b.tensorOf("RMSNorm", dst), b.tensorOf("RMSNorm", x), b.weightOf("RMSNorm", w)
	if d == nil || cx == nil || cw == nil {
		return
	}
	g := cw.cols
	if cw.typ != gguf.F32 || cw.rows != 1 || cx.cols%g != 0 || d.cols != cx.cols || b.active(d) != b.active(cx) {
		b.fail(fmt.Errorf("%w: RMSNorm of %s (%d×%d) by %s (%v %s) into %s", infer.ErrBadShape, cx.name, cx.rows, cx.cols, cw.name, cw.shape, cw.typ, d.name))
		return
	}
	b.norm = normJob{d: d, x: cx, w: f32s(cw.data), eps: eps, groups: cx.cols / g}
	b.parallel(b.active(cx)*b.norm.groups, unitGrain(g), &b.norm)
	b.norm = normJob{}
}

// unitGrain is the fewest groups of n values (a row, or a head of one) a
// share of a row-wise op holds: about 512 values (a few µs of RoPE), so
// that a decoding step's one row of many heads (q and k's norms, RoPE) is
// split over the pool too (on 16 cores its serial ops left the other 15
// waiting a quarter of the time), while a row of one group stays whole.
func unitGrain(n int) int { return max(1, 512/n) }

// rowGrain is the fewest rows a share of a row-wise op holds: a decoding
// step's one row (or a verify pass's few) runs on the calling thread, a
// prompt's many are split over the pool.
const rowGrain = 4

// normJob normalises groups of len(w) values: unit u is group u%groups of
// row u/groups.
type normJob struct {
	d, x   *tensor
	w      []float32
	eps    float32
	groups int
}

func (j *normJob) run(lo, hi, _ int) {
	g := len(j.w)
	for u := lo; u < hi; u++ {
		r, s := u/j.groups, u%j.groups*g
		rmsNorm(j.d.row(r)[s:s+g], j.x.row(r)[s:s+g], j.w, j.eps)
	}
}

// rmsNorm is ggml_rms_norm followed by the weight: the sum of squares in
// f64 of f32 products, mean and scale in f32, then x·scale·w.
func rmsNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		dst[i] = v * scale * w[i]
	}
}

func (b *Backend) Rope(x infer.Tensor, r infer.Rope) {
	if !b.ok() {
		return
	}
	cx := b.tensorOf("Rope", x)
	if cx == nil {
		return
	}
	if r.HeadDim <= 0 || r.Dims <= 0 || r.Dims > r.HeadDim || r.Dims%2 != 0 || cx.cols%r.HeadDim != 0 ||
		(r.Factors != nil && len(r.Factors.Values) != r.Dims/2) {
		b.fail(fmt.Errorf("%w: Rope of %s (%d cols) with head %d, %d rotated dims", infer.ErrBadShape, cx.name, cx.cols, r.HeadDim, r.Dims))
		return
	}
	cos, sin := b.ropeAngles(r)
	b.rope = ropeJob{x: cx, cos: cos, sin: sin, r: r, heads: cx.cols / r.HeadDim}
	b.parallel(b.active(cx)*b.rope.heads, unitGrain(r.HeadDim), &b.rope)
	b.rope = ropeJob{}
}

// ropeJob rotates heads: unit u is head u%heads of row u/heads.
type ropeJob struct {
	x        *tensor
	cos, sin []float32
	r        infer.Rope
	heads    int
}

func (j *ropeJob) run(lo, hi, _ int) {
	half := j.r.Dims / 2
	// Pair k is (k, k+half) in NeoX mode, (2k, 2k+1) in normal mode.
	first, second := 1, half
	if j.r.Mode == infer.RopeNormal {
		first, second = 2, 1
	}
	for u := lo; u < hi; u++ {
		i, h := u/j.heads, u%j.heads*j.r.HeadDim
		c, s := j.cos[i*half:(i+1)*half], j.sin[i*half:(i+1)*half]
		head := j.x.row(i)[h : h+j.r.Dims]
		for k := range half {
			a, b := k*first, k*first+second
			x0, x1 := head[a], head[b]
			// GCC contracts ggml's x0·cos − x1·sin into one FMA
			// over the rounded x1·sin, and likewise the sum.
			head[a] = quant.FMA32(x0, c[k], -(x1 * s[k]))
			head[b] = quant.FMA32(x0, s[k], x1*c[k])
		}
	}
}

// ropeAngles returns the cos and sin tables of the batch's positions for r
// (row i at [i·Dims/2, (i+1)·Dims/2)), computed once per pass: Q and K of
// every layer rotate by the same angles.
func (b *Backend) ropeAngles(r infer.Rope) (cos, sin []float32) {
	half := r.Dims / 2
	if b.ropeValid && b.ropeFor == r {
		return b.ropeCos[:b.n*half], b.ropeSin[:b.n*half]
	}
	if need := b.n * half; len(b.ropeCos) < need {
		b.ropeCos, b.ropeSin = make([]float32, need), make([]float32, need)
	}
	for i := range b.n {
		r.Angles(b.pos(i), b.ropeCos[i*half:(i+1)*half], b.ropeSin[i*half:(i+1)*half])
	}
	b.ropeFor, b.ropeValid = r, true
	return b.ropeCos[:b.n*half], b.ropeSin[:b.n*half]
}

func (b *Backend) StoreKV(layer int, k, v infer.Tensor) {
	if !b.ok() {
		return
	}
	ck, cv := b.tensorOf("StoreKV", k), b.tensorOf("StoreKV", v)
	if ck == nil || cv == nil {
		return
	}
	s := b.kv.spec
	width := s.KVHeads * s.HeadDim
	if layer < 0 || layer >= s.Layers || ck.cols != width || cv.cols != width || b.active(ck) != b.n || b.active(cv) != b.n {
		b.fail(fmt.Errorf("%w: StoreKV layer %d of %s (%d×%d), %s (%d×%d) into a cache of %+v", infer.ErrBadShape, layer, ck.name, ck.rows, ck.cols, cv.name, cv.rows, cv.cols, s))
		return
	}
	b.store = storeJob{b: b, k: ck, v: cv, layer: layer}
	b.parallel(b.n, rowGrain, &b.store)
	b.store = storeJob{}
}

type storeJob struct {
	b     *Backend
	k, v  *tensor
	layer int
}

func (j *storeJob) run(lo, hi, worker int) {
	c := &j.b.kv
	dim := c.spec.HeadDim
	if c.spec.Quantized() {
		rot := j.b.flash[worker].rot[:dim]
		for i := lo; i < hi; i++ {
			p := j.b.base(i) + j.b.pos(i)
			k, v := j.k.row(i), j.v.row(i)
			for g := range c.spec.KVHeads {
				storeRow(c.spec.K, c.kRot, c.kRows(j.layer, g, p)[:c.kRow], k[g*dim:(g+1)*dim], rot)
				storeRow(c.spec.V, c.vRot, c.vRows(j.layer, g, p)[:c.vRow], v[g*dim:(g+1)*dim], rot)
			}
		}
		return
	}
	for i := lo; i < hi; i++ {
		p := j.b.base(i) + j.b.pos(i)
		k, v := j.k.row(i), j.v.row(i)
		for g := range c.spec.KVHeads {
			quant.F32sToF16(c.kHead(j.layer, g, p)[:dim], k[g*dim:(g+1)*dim])
			// V goes down a column of its dimensions: narrowed a chunk at a
			// time by the vector conversion, then scattered.
			vByDim := c.vHead(j.layer, g, p)
			var chunk [64]uint16
			for d0 := 0; d0 < dim; d0 += len(chunk) {
				n := min(len(chunk), dim-d0)
				quant.F32sToF16(chunk[:n], v[g*dim+d0:g*dim+d0+n])
				for d, h := range chunk[:n] {
					vByDim[(d0+d)*c.vStride] = h
				}
			}
		}
	}
}

// storeRow writes one head's values into a cache row of type t: Q8_0 as
// ggml's set_rows quantizes it (the CPU type's from_float, the activations'
// quantizer), after the rotation llama.cpp applies to a quantized K or V
// (rotate, when rot > 0); f16 rounded to nearest even.
func storeRow(t infer.KVType, rot int, dst []byte, src, scratch []float32) {
	if t != infer.KVQ8_0 {
		quant.F32sToF16(unsafeHalves(dst), src)
		return
	}
	if rot > 0 {
		rotate(scratch, src, rot)
		src = scratch
	}
	quant.QuantizeActivations(gguf.Q8_0, src, dst)
}

func (b *Backend) SwiGLU(dst, gate, up infer.Tensor) {
	if !b.ok() {
		return
	}
	d, g, u := b.tensorOf("SwiGLU", dst), b.tensorOf("SwiGLU", gate), b.tensorOf("SwiGLU", up)
	if d == nil || g == nil || u == nil {
		return
	}
	if g.cols != u.cols || d.cols != g.cols || b.active(d) != b.active(g) || b.active(g) != b.active(u) {
		b.fail(fmt.Errorf("%w: SwiGLU of %s, %s into %s", infer.ErrBadShape, g.name, u.name, d.name))
		return
	}
	n := b.active(g) * g.cols
	b.swiglu = swigluJob{gate: g.data[:n], up: u.data[:n], dst: d.data[:n]}
	b.parallel((n+swigluBlock-1)/swigluBlock, 2048/swigluBlock, &b.swiglu)
}

// swigluBlock is quant.SwiGLU's vector width: shares split at its multiples
// so each share rounds exactly as one call over the whole row would.
const swigluBlock = 16

// swigluJob computes silu(gate)·up over blocks [lo, hi) of swigluBlock
// elements (the last one possibly short).
type swigluJob struct{ gate, up, dst []float32 }

func (j *swigluJob) run(lo, hi, _ int) {
	lo, hi = lo*swigluBlock, min(hi*swigluBlock, len(j.dst))
	quant.SwiGLU(j.dst[lo:hi], j.gate[lo:hi], j.up[lo:hi])
}

func (b *Backend) Add(dst, x, y infer.Tensor) {
	if !b.ok() {
		return
	}
	d, cx, cy := b.tensorOf("Add", dst), b.tensorOf("Add", x), b.tensorOf("Add", y)
	if d == nil || cx == nil || cy == nil {
		return
	}
	if cx.cols != cy.cols || d.cols != cx.cols || b.active(d) != b.active(cx) || b.active(cx) != b.active(cy) {
		b.fail(fmt.Errorf("%w: Add of %s, %s into %s", infer.ErrBadShape, cx.name, cy.name, d.name))
		return
	}
	n := b.active(cx) * cx.cols
	b.add = addJob{x: cx.data[:n], y: cy.data[:n], d: d.data[:n]}
	b.parallel((n+addBlock-1)/addBlock, rowGrain, &b.add)
	b.add = addJob{}
}

// addBlock is the elements of one share of Add.
const addBlock = 2048

type addJob struct{ x, y, d []float32 }

func (j *addJob) run(lo, hi, _ int) {
	lo, hi = lo*addBlock, min(hi*addBlock, len(j.d))
	x, y, d := j.x[lo:hi], j.y[lo:hi], j.d[lo:hi]
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

func (b *Backend) AddBias(x infer.Tensor, bias infer.Weight) {
	if !b.ok() {
		return
	}
	cx, cw := b.tensorOf("AddBias", x), b.weightOf("AddBias", bias)
	if cx == nil || cw == nil {
		return
	}
	if cw.typ != gguf.F32 || cw.rows != 1 || cw.cols != cx.cols {
		b.fail(fmt.Errorf("%w: AddBias of %s (%v %s) to %s (%d cols)", infer.ErrBadShape, cw.name, cw.shape, cw.typ, cx.name, cx.cols))
		return
	}
	w := f32s(cw.data)
	for i := range b.active(cx) {
		row := cx.row(i)
		for j, v := range w {
			row[j] += v
		}
	}
}

func (b *Backend) Scale(x infer.Tensor, s float32) {
	if !b.ok() {
		return
	}
	cx := b.tensorOf("Scale", x)
	if cx == nil {
		return
	}
	for i := range b.active(cx) {
		row := cx.row(i)
		for j := range row {
			row[j] *= s
		}
	}
}

func (b *Backend) LastRow(dst, src infer.Tensor) {
	if !b.ok() {
		return
	}
	d, s := b.tensorOf("LastRow", dst), b.tensorOf("LastRow", src)
	if d == nil || s == nil {
		return
	}
	if d.cols != s.cols || b.active(s) != b.n || d == s {
		b.fail(fmt.Errorf("%w: LastRow of %s (%d×%d) into %s (%d×%d)", infer.ErrBadShape, s.name, s.rows, s.cols, d.name, d.rows, d.cols))
		return
	}
	copy(d.row(0), s.row(b.n-1))
}

func (b *Backend) Read(t infer.Tensor, dst []float32) {
	if !b.ok() {
		return
	}
	ct := b.tensorOf("Read", t)
	if ct == nil {
		return
	}
	n := b.active(ct) * ct.cols
	if len(dst) < n {
		b.fail(fmt.Errorf("%w: Read of %s needs %d floats, got %d", infer.ErrBadShape, ct.name, n, len(dst)))
		return
	}
	copy(dst, ct.data[:n])
}

func (b *Backend) Argmax(t infer.Tensor, dst []int32) {
	if !b.ok() {
		return
	}
	ct := b.tensorOf("Argmax", t)
	if ct == nil {
		return
	}
	rows := b.active(ct)
	if len(dst) < rows {
		b.fail(fmt.Errorf("%w: Argmax of %s needs %d slots, got %d", infer.ErrBadShape, ct.name, rows, len(dst)))
		return
	}
	for r := range rows {
		row := ct.row(r)
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		dst[r] = int32(best)
	}
}

// f32s views F32 weight bytes as floats (little-endian host).
func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafeFloats(b)
}
