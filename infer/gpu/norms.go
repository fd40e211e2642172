package gpu

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
)

// The token norms and the elementwise ops, Embed and LastRow.

func (b *Backend) Embed(dstT infer.Tensor, wI infer.Weight) {
	if !b.ready() {
		return
	}
	dst, w := b.tensorArg("Embed dst", dstT), b.weightArg("Embed", wI)
	if dst == nil || w == nil {
		return
	}
	if dst.cols != w.k {
		b.shapeErr("Embed: dst has %d columns, %s rows have %d", dst.cols, w.name, w.k)
		return
	}
	for _, t := range b.batch.Tokens {
		if t < 0 || int(t) >= w.m {
			b.shapeErr("Embed: token %d outside the vocabulary of %d", t, w.m)
			return
		}
	}
	n := b.active(dst)
	if b.chain.tokens && !w.q1() {
		b.fail(fmt.Errorf("gpu: chained decoding with %s embeddings: %w", w.name, ErrUnsupported))
		return
	}
	if w.q1() {
		o := b.prepared(opKey{kind: "embed", a: dst, b: w}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("embed", q1Layout(map[string]shaders.Const{
				"K": shaders.U32(w.k), "VOCAB": shaders.U32(w.m), "XROWS": shaders.U32(dst.rows), "Q1": shaders.Flag(true)}, w.interleaved, w.m))
			return k, []binding{whole(b.batchBuf), whole(b.tokensBuf), w.bits.binding(), w.scales.binding(), whole(dst.buf)}, err
		})
		b.dispatch(o, ceilDiv(w.k, 256), n, 1)
		return
	}
	// Other types: dequantize the few rows on the CPU (the file's bytes
	// stay mapped) and copy them in order with the pass.
	if dst.embedRows == nil {
		buf, err := b.d.newBuffer(dst.name+".embed", uint64(dst.rows*dst.cols*4), storageUsage)
		if err != nil {
			b.fail(err)
			return
		}
		dst.embedRows = buf
	}
	rows := make([]byte, n*w.k*4)
	if err := w.embedRows(b.batch.Tokens[:n], rows); err != nil {
		b.fail(err)
		return
	}
	if err := b.d.queue.WriteBuffer(dst.embedRows, 0, rows); err != nil {
		b.fail(fmt.Errorf("gpu: writing embeddings: %w", err))
		return
	}
	o := b.prepared(opKey{kind: "embedcopy", a: dst}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("elementwise", map[string]shaders.Const{
			"COLS": shaders.U32(dst.cols), "XROWS": shaders.U32(dst.rows), "ALIAS_A": shaders.Flag(true), "COPY": shaders.Flag(true)})
		return k, []binding{whole(b.batchBuf), whole(dst.embedRows), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(dst.cols, 256), n, 1)
}

func (b *Backend) RMSNorm(dstT, xT infer.Tensor, wI infer.Weight, eps float32) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, x, w := b.asTensor("RMSNorm dst", dstT), b.asTensor("RMSNorm x", xT), b.weightArg("RMSNorm", wI)
	if dst == nil || x == nil || w == nil {
		return
	}
	g := w.k * w.m
	if w.typ != gguf.F32 || g == 0 || x.cols%g != 0 || dst.cols != x.cols {
		b.shapeErr("RMSNorm: weight %s (%s, %d values) against rows of %d", w.name, w.typ, g, x.cols)
		return
	}
	// A per-head norm in place waits for the Rope after it (norm_rope,
	// qk_rope_store, the fused attention).
	if dst == x && g < x.cols {
		b.record(node{op: opHeadNorm, x: x, w: w, eps: eps})
		return
	}
	// A decode token norm also writes its Q8_0 rounding for the matvecs
	// that read it.
	q8 := b.xqOK() && b.n == 1 && g == x.cols && x.cols%128 == 0 && min(x.rows, dst.rows) >= 1
	b.record(node{op: opNorm, dst: dst, x: x, w: w, eps: eps, q8: q8})
}

// actQ8Op is a decode row that act_q8.wgsl computes with its Q8_0
// rounding, one of: dst = RMSNorm(x)·norm over the row (dst ≠ x;
// rmsnorm.wgsl's 256-thread summation order); dst = silu(x)·up (dst may
// be x), with up first normed in place per head where upNorm is set (a
// vHeadNorm waiting on up, computed as that value would be); dst =
// x·sigmoid(gate) (dst may be x), unary.wgsl's gate.
type actQ8Op struct {
	dst, x *tensor
	norm   *weight
	eps    float32
	up     *tensor
	upNorm value
	gate   *tensor
}

// actQ8 encodes a as one dispatch, one thread per value.
func (b *Backend) actQ8(a actQ8Op) {
	dst, x := a.dst, a.x
	g := x.cols
	inplace := dst == x
	keyEps := a.eps // the norm's: the row's (norm) or up's heads' (upNorm), never both
	if a.upNorm.w != nil {
		keyEps = a.upNorm.eps
	}
	o := b.prepared(opKey{kind: "actq8", a: dst, b: x, c: a.norm, d: a.up, e: a.gate, f: keyEps, g: a.upNorm.w}, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{"G": shaders.U32(g), "WG": shaders.U32(256), "INPLACE": shaders.Flag(inplace),
			"HNORM": shaders.Flag(a.upNorm.w != nil)}
		var bufs []binding
		if !inplace {
			bufs = append(bufs, at(0, whole(x.buf)))
		}
		switch {
		case a.norm != nil:
			defs["NORM"], defs["EPS"] = shaders.Flag(true), shaders.F32(a.eps)
			bufs = append(bufs, at(1, whole(a.norm.chunks[0].buf)))
		case a.gate != nil:
			defs["GATE"] = shaders.Flag(true)
			bufs = append(bufs, at(1, whole(a.gate.buf)))
		default:
			defs["GLU"] = shaders.Flag(true)
			bufs = append(bufs, at(1, whole(a.up.buf)))
		}
		if hw := a.upNorm.w; hw != nil {
			defs["NG"], defs["HEPS"] = shaders.U32(hw.k*hw.m), shaders.F32(a.upNorm.eps)
			bufs = append(bufs, at(6, whole(hw.chunks[0].buf)))
		}
		bufs = b.tabOut(dst, 5, defs, append(bufs, at(2, whole(dst.buf)), at(3, whole(dst.xq)), at(4, whole(dst.xqSum))))
		k, err := b.d.kernel("act_q8", defs)
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(g, 256), 1, 1)
}

// normThreads is the workgroup size of rmsnorm.wgsl over groups of g
// values; the matvecs that fuse a norm reproduce its summation order.
func normThreads(g int) int {
	wg := 32
	for wg*2 <= g && wg < 256 {
		wg *= 2
	}
	return wg
}

// rmsNorm encodes RMSNorm (operands checked), with q8 also dst's Q8_0
// rounding into dst.xq.
func (b *Backend) rmsNorm(dst, x *tensor, w *weight, eps float32, q8 bool) {
	g := w.k * w.m
	rows := min(x.rows, dst.rows)
	n := min(rows, b.n)
	wg := normThreads(g)
	inplace := dst == x
	o := b.prepared(opKey{kind: "rmsnorm", a: dst, b: x, c: w, f: eps, i: boolInt(q8)}, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "G": shaders.U32(g), "EPS": shaders.F32(eps), "WG": shaders.U32(wg),
			"XROWS": shaders.U32(rows), "INPLACE": shaders.Flag(inplace), "Q8": shaders.Flag(q8)}
		bufs := []binding{whole(b.batchBuf), whole(w.chunks[0].buf)}
		if !inplace {
			bufs = append(bufs, whole(x.buf))
		}
		bufs = append(bufs, whole(dst.buf))
		if q8 {
			bufs = b.tabOut(dst, 6, defs, append(bufs, at(4, whole(dst.xq)), at(5, whole(dst.xqSum))))
		}
		k, err := b.d.kernel("rmsnorm", defs)
		return k, bufs, err
	})
	b.dispatch(o, x.cols/g, n, 1)
}

// elementwise encodes dst = f(a, b) with the aliasing variant the operands
// need.
func (b *Backend) elementwise(kind string, dst, x, y *tensor) {
	if x.cols != y.cols || dst.cols != x.cols {
		b.shapeErr("%s: %d, %d and %d columns", kind, dst.cols, x.cols, y.cols)
		return
	}
	rows := min(dst.rows, x.rows, y.rows)
	n := min(rows, b.n)
	variant := "NOALIAS"
	bufs := []binding{whole(b.batchBuf)}
	switch {
	case dst == x:
		variant = "ALIAS_A"
		bufs = append(bufs, whole(y.buf), whole(dst.buf))
	case dst == y:
		variant = "ALIAS_B"
		bufs = append(bufs, whole(x.buf), whole(dst.buf))
	default:
		bufs = append(bufs, whole(x.buf), whole(y.buf), whole(dst.buf))
	}
	o := b.prepared(opKey{kind: kind, a: dst, b: x, c: y}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("elementwise", map[string]shaders.Const{
			"COLS": shaders.U32(dst.cols), "XROWS": shaders.U32(rows), variant: shaders.Flag(true), kind: shaders.Flag(true)})
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(dst.cols, 256), n, 1)
}

// SwiGLU is recorded: fuse makes it gate/up's q1_xq epilogue where it
// can, else computes it in the down matvec's x load (gate and up fresh
// from one pair of matvecs); otherwise (qwen35's DeltaNet output gate: its
// operands come from different ops) a dispatch of its own that also
// rounds for the next q1_xq is cheaper (q8).
func (b *Backend) SwiGLU(dstT, gateT, upT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, g, u := b.asTensor("SwiGLU dst", dstT), b.asTensor("SwiGLU gate", gateT), b.asTensor("SwiGLU up", upT)
	if dst == nil || g == nil || u == nil {
		return
	}
	if g == u {
		b.shapeErr("SwiGLU: gate and up are the same tensor")
		return
	}
	shaped := b.n == 1 && dst != u && g.cols == u.cols && dst.cols == g.cols
	b.record(node{op: opSwiGLU, dst: dst, x: g, y: u,
		q8:   b.xqOK() && shaped && g.cols%32 == 0 && dst.rows >= 1,
		lazy: !b.noFuse && shaped && g.cols%4 == 0})
}

// Add is recorded: fuse folds x += W·v right after that matvec into its
// dispatch (it still writes its own output, so nothing changes for
// readers).
func (b *Backend) Add(dstT, aT, bT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, x, y := b.asTensor("Add dst", dstT), b.asTensor("Add a", aT), b.asTensor("Add b", bT)
	if dst == nil || x == nil || y == nil {
		return
	}
	if dst == x && dst == y {
		b.shapeErr("Add: dst, a and b are the same tensor")
		return
	}
	b.record(node{op: opAdd, dst: dst, x: x, y: y})
}

// AddBias encodes unary.wgsl's BIAS in place.
func (b *Backend) AddBias(xT infer.Tensor, biasW infer.Weight) {
	if !b.ready() {
		return
	}
	x := b.tensorArg("AddBias x", xT)
	if x == nil {
		return
	}
	bias := b.vectorArg("AddBias bias", biasW, x.cols)
	if bias == nil {
		return
	}
	defs := map[string]shaders.Const{"COLS": shaders.U32(x.cols), "XROWS": shaders.U32(x.rows), "BIAS": shaders.Flag(true), "ALIAS_X": shaders.Flag(true)}
	o := b.prepared(opKey{kind: "addbias", a: x, c: bias}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("unary", defs)
		return k, []binding{whole(b.batchBuf), at(3, whole(x.buf)), at(4, whole(bias.chunks[0].buf))}, err
	})
	b.dispatch(o, ceilDiv(x.cols, 256), min(x.rows, b.n), 1)
}

// Scale encodes unary.wgsl's SCALE in place.
func (b *Backend) Scale(xT infer.Tensor, s float32) {
	if !b.ready() {
		return
	}
	x := b.tensorArg("Scale x", xT)
	if x == nil {
		return
	}
	defs := map[string]shaders.Const{"COLS": shaders.U32(x.cols), "XROWS": shaders.U32(x.rows), "SCALE": shaders.Flag(true),
		"ALIAS_X": shaders.Flag(true), "S": shaders.F32(s)}
	o := b.prepared(opKey{kind: "scale", a: x, f: s}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("unary", defs)
		return k, []binding{whole(b.batchBuf), at(3, whole(x.buf))}, err
	})
	b.dispatch(o, ceilDiv(x.cols, 256), min(x.rows, b.n), 1)
}

func (b *Backend) LastRow(dstT, srcT infer.Tensor) {
	if !b.ready() {
		return
	}
	dst, src := b.tensorArg("LastRow dst", dstT), b.tensorArg("LastRow src", srcT)
	if dst == nil || src == nil {
		return
	}
	if dst.cols != src.cols || dst == src {
		b.shapeErr("LastRow: %d vs %d columns", dst.cols, src.cols)
		return
	}
	o := b.prepared(opKey{kind: "lastrow", a: dst, b: src}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("lastrow", map[string]shaders.Const{"COLS": shaders.U32(src.cols), "SROWS": shaders.U32(src.rows)})
		return k, []binding{whole(b.batchBuf), whole(src.buf), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(src.cols, 256), 1, 1)
}
