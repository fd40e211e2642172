package gpu

import (
	"errors"
	"fmt"
	"math"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// The ops of hybrid (qwen35) layers and Hadamard-rotated weights. Each is
// its own dispatch: none is folded into a neighbour, so each is tested
// alone (hybrid_test.go) against a float64 reference.

// recurrent is the state of the network's recurrent layers: per layer a
// conv buffer (ConvWidth−1 rows of Channels) and a delta-rule buffer (VHeads
// matrices of HeadDim², each transposed as llama.cpp keeps it: element
// j·HeadDim + i is S[i][j]). Separate buffers keep every binding small (a
// 27B layer's delta state is 3 MiB; all 48 exceed lavapipe's 128 MiB).
//
// Chained passes (chain.go) ping-pong: each layer's buffer has a twin
// (prev), and a chained step reads the state from one and writes it to the
// other, which then becomes the state; the twin keeps the state one token
// back, so the pass in flight when a chain stops can be taken back
// (StepBack) by swapping the pairs again. A step moves the same bytes as
// in place; the twins double the state's memory (a 27B's 150 MiB), made
// when chained mode first starts.
type recurrent struct {
	spec        infer.RecurrentSpec
	conv, delta []*wgpu.Buffer
	// the twins, and per layer whether the twin holds the state before
	// the last step (a chained one)
	convPrev, deltaPrev []*wgpu.Buffer
	convBack, deltaBack []bool
	// the sequence states (infer.SeqStates, rows.go): per slot its
	// layers' buffers, nil for the slot cur, whose are conv and delta
	seqConv, seqDelta [][]*wgpu.Buffer
	cur               int
	// the slabs (rows.go): per layer every slot's state in one buffer,
	// slot s's from s·stride bytes, which passes over rows of several
	// sequences step; inSlab says where a slot's state is current
	slabConv, slabDelta     []*wgpu.Buffer
	convStride, deltaStride uint64
	inSlab                  []bool
}

func (r *recurrent) buffers() []*wgpu.Buffer {
	bufs := append(append(append(append([]*wgpu.Buffer(nil), r.conv...), r.delta...), r.convPrev...), r.deltaPrev...)
	for s := range r.seqConv {
		bufs = append(append(bufs, r.seqConv[s]...), r.seqDelta[s]...)
	}
	return append(append(bufs, r.slabConv...), r.slabDelta...)
}

func (r *recurrent) release() {
	for _, buf := range r.buffers() {
		buf.Release()
	}
}

// twins makes the ping-pong twins of every layer's state, once.
func (b *Backend) twins() error {
	r := b.rec
	if r == nil || r.convPrev != nil {
		return nil
	}
	var conv, delta []*wgpu.Buffer
	for l := range r.conv {
		c, err := b.d.newBuffer(fmt.Sprintf("conv state %d'", l), r.conv[l].GetSize(), storageUsage)
		if err == nil {
			conv = append(conv, c)
			var d *wgpu.Buffer
			if d, err = b.d.newBuffer(fmt.Sprintf("delta state %d'", l), r.delta[l].GetSize(), storageUsage); err == nil {
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
	r.convPrev, r.deltaPrev = conv, delta
	r.convBack, r.deltaBack = make([]bool, len(conv)), make([]bool, len(delta))
	return nil
}

// step returns the buffers layer's state is read from and written to by
// the op being encoded: twins in a chained one-token pass, after which
// they swap roles; the same buffer elsewhere.
func (b *Backend) step(state, prev []*wgpu.Buffer, back []bool, layer int) (in, out *wgpu.Buffer) {
	if !b.chain.on || b.n != 1 || prev == nil {
		if back != nil {
			back[layer] = false
		}
		return state[layer], state[layer]
	}
	in, out = state[layer], prev[layer]
	state[layer], prev[layer], back[layer] = out, in, true
	return in, out
}

var _ infer.ChainedRecurrent = (*Backend)(nil)

// CanStepBack reports whether every layer's last step was a chained one,
// its twin holding the state before it.
func (b *Backend) CanStepBack() bool {
	r := b.rec
	ok := r != nil && r.convPrev != nil && r.cur == 0
	for l := 0; ok && l < len(r.conv); l++ {
		ok = r.convBack[l] && r.deltaBack[l]
	}
	return ok
}

// StepBack returns the recurrent state to what it was before the last
// chained step, the pass in flight when the chain stopped; it fails with
// infer.ErrStateMismatch, changing nothing, where a layer's last step was
// not a chained one.
func (b *Backend) StepBack() error {
	if b.enc != nil {
		return errInPass
	}
	if !b.CanStepBack() {
		return fmt.Errorf("gpu: no chained step to take back: %w", infer.ErrStateMismatch)
	}
	r := b.rec
	for l := range r.conv {
		r.conv[l], r.convPrev[l] = r.convPrev[l], r.conv[l]
		r.delta[l], r.deltaPrev[l] = r.deltaPrev[l], r.delta[l]
		r.convBack[l], r.deltaBack[l] = false, false
	}
	return nil
}

func (r *recurrent) convFloats() int { return max(r.spec.ConvWidth-1, 0) * r.spec.Channels }
func (r *recurrent) deltaFloats() int {
	return r.spec.VHeads * r.spec.HeadDim * r.spec.HeadDim
}

func (b *Backend) NewRecurrentState(spec infer.RecurrentSpec) error {
	if b.rec != nil {
		b.dropOps(b.rec.buffers()...)
		b.rec.release()
		b.rec = nil
	}
	if spec.Layers == 0 {
		return nil
	}
	if spec.Layers < 0 || spec.Channels <= 0 || spec.ConvWidth <= 0 || spec.VHeads <= 0 || spec.HeadDim <= 0 {
		return fmt.Errorf("gpu: recurrent state %+v: %w", spec, infer.ErrBadShape)
	}
	r := &recurrent{spec: spec}
	limit := b.d.Limits.MaxStorageBufferBindingSize
	if uint64(4*r.deltaFloats()) > limit || uint64(4*r.convFloats()) > limit {
		return fmt.Errorf("gpu: a recurrent layer's state of %d MiB exceeds the %d MiB storage binding: %w",
			4*r.deltaFloats()>>20, limit>>20, ErrOutOfMemory)
	}
	for l := 0; l < spec.Layers; l++ {
		c, err := b.d.newBuffer(fmt.Sprintf("conv state %d", l), uint64(4*r.convFloats()), storageUsage)
		if err != nil {
			r.release()
			return err
		}
		r.conv = append(r.conv, c)
		d, err := b.d.newBuffer(fmt.Sprintf("delta state %d", l), uint64(4*r.deltaFloats()), storageUsage)
		if err != nil {
			r.release()
			return err
		}
		r.delta = append(r.delta, d)
	}
	b.rec = r
	return nil
}

// errInPass: the state is copied between passes only.
var errInPass = errors.New("gpu: recurrent state copied during a pass")

func (b *Backend) ReadRecurrentState(dst []float32) error {
	if b.enc != nil {
		return errInPass
	}
	b.useSeq(0) // Forward's
	if err := b.ownStateNow(); err != nil {
		return err
	}
	if b.rec == nil {
		if len(dst) == 0 {
			return nil
		}
		return fmt.Errorf("gpu: ReadRecurrentState without a recurrent state: %w", infer.ErrBadShape)
	}
	total := int(b.rec.spec.Floats())
	if len(dst) < total {
		return fmt.Errorf("gpu: ReadRecurrentState: %d floats for a state of %d: %w", len(dst), total, infer.ErrBadShape)
	}
	staging, err := b.d.newBuffer("recurrent state read", uint64(4*total), readUsage)
	if err != nil {
		return err
	}
	defer staging.Release()
	enc, err := b.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err)
	}
	var off uint64
	for l := range b.rec.conv {
		for _, p := range []struct {
			buf    *wgpu.Buffer
			floats int
		}{{b.rec.conv[l], b.rec.convFloats()}, {b.rec.delta[l], b.rec.deltaFloats()}} {
			if p.floats == 0 {
				continue
			}
			if err := enc.CopyBufferToBuffer(p.buf, 0, staging, off, uint64(4*p.floats)); err != nil {
				enc.Release()
				return fmt.Errorf("gpu: copying the recurrent state: %w", err)
			}
			off += uint64(4 * p.floats)
		}
	}
	cmd, err := enc.Finish(nil)
	enc.Release()
	if err != nil {
		return fmt.Errorf("gpu: copying the recurrent state: %w", err)
	}
	b.d.queue.Submit(cmd)
	cmd.Release()
	if err := waitIdle(b.d.dev); err != nil {
		return err
	}
	raw := make([]byte, 4*total)
	if err := readBuffer(b.d.dev, staging, 0, raw); err != nil {
		return err
	}
	bytesToFloats(raw, dst[:total])
	return nil
}

func (b *Backend) WriteRecurrentState(src []float32) error {
	if b.enc != nil {
		return errInPass
	}
	b.useSeq(0) // Forward's
	if r := b.rec; r != nil && r.inSlab != nil {
		r.inSlab[r.cur] = false // written whole below
	}
	if b.rec == nil {
		if len(src) == 0 {
			return nil
		}
		return fmt.Errorf("gpu: WriteRecurrentState without a recurrent state: %w", infer.ErrBadShape)
	}
	total := int(b.rec.spec.Floats())
	if len(src) < total {
		return fmt.Errorf("gpu: WriteRecurrentState: %d floats for a state of %d: %w", len(src), total, infer.ErrBadShape)
	}
	off := 0
	for l := range b.rec.conv {
		for _, p := range []struct {
			buf    *wgpu.Buffer
			floats int
		}{{b.rec.conv[l], b.rec.convFloats()}, {b.rec.delta[l], b.rec.deltaFloats()}} {
			if p.floats == 0 {
				continue
			}
			if err := b.d.queue.WriteBuffer(p.buf, 0, floatsToBytes(src[off:off+p.floats])); err != nil {
				return fmt.Errorf("gpu: writing the recurrent state: %w", err)
			}
			off += p.floats
		}
	}
	for l := range b.rec.convBack {
		b.rec.convBack[l], b.rec.deltaBack[l] = false, false
	}
	// Later passes read it in queue order; waiting here only makes the
	// write complete before returning, as the interface promises.
	b.d.queue.Submit()
	return waitIdle(b.d.dev)
}

func (b *Backend) CopyCols(dstT, srcT infer.Tensor, c infer.Cols) {
	if !b.ready() {
		return
	}
	dst, src := b.tensorArg("CopyCols dst", dstT), b.tensorArg("CopyCols src", srcT)
	if dst == nil || src == nil {
		return
	}
	if dst == src || c.Width <= 0 || c.Count <= 0 || c.Dst < 0 || c.Src < 0 || c.Stride < 0 ||
		c.Dst+c.Count*c.Width > dst.cols || c.Src+(c.Count-1)*c.Stride+c.Width > src.cols {
		b.shapeErr("CopyCols: %+v from rows of %d into rows of %d", c, src.cols, dst.cols)
		return
	}
	rows := min(dst.rows, src.rows)
	o := b.prepared(opKey{kind: "copycols", a: dst, b: src, c: c}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("copy_cols", map[string]shaders.Const{
			"SCOLS": shaders.U32(src.cols), "DCOLS": shaders.U32(dst.cols), "SRC0": shaders.U32(c.Src), "DST0": shaders.U32(c.Dst),
			"WIDTH": shaders.U32(c.Width), "STRIDE": shaders.U32(c.Stride), "COUNT": shaders.U32(c.Count), "XROWS": shaders.U32(rows)})
		return k, []binding{whole(b.batchBuf), whole(src.buf), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(c.Count*c.Width, 256), min(rows, b.n), 1)
}

// actFlag is unary.wgsl's flag for f, or "" for an unknown activation.
func actFlag(f infer.Act) string {
	switch f {
	case infer.ActSigmoid:
		return "SIGMOID"
	case infer.ActSiLU:
		return "SILU"
	case infer.ActSoftplus:
		return "SOFTPLUS"
	case infer.ActGELU:
		return "GELU"
	}
	return ""
}

func (b *Backend) Unary(dstT, xT infer.Tensor, f infer.Act) {
	b.activation("Unary", dstT, xT, nil, f)
}

func (b *Backend) Gate(dstT, xT, gT infer.Tensor, f infer.Act) {
	if gT == nil {
		b.shapeErr("Gate: no gate tensor")
		return
	}
	b.activation("Gate", dstT, xT, gT, f)
}

// activation encodes unary.wgsl's UNARY (gT nil) or GATE.
func (b *Backend) activation(name string, dstT, xT, gT infer.Tensor, f infer.Act) {
	if !b.ready() {
		return
	}
	dst, x := b.tensorArg(name+" dst", dstT), b.tensorArg(name+" x", xT)
	var g *tensor
	if gT != nil {
		g = b.tensorArg(name+" g", gT)
		if g == nil {
			return
		}
	}
	if dst == nil || x == nil {
		return
	}
	flag := actFlag(f)
	if flag == "" {
		b.shapeErr("%s: activation %d", name, int(f))
		return
	}
	rows := min(dst.rows, x.rows)
	if dst.cols != x.cols || g != nil && g.cols != x.cols {
		b.shapeErr("%s: dst %d, x %d columns", name, dst.cols, x.cols)
		return
	}
	// A decode row's sigmoid gate (qwen35's attention output) also writes
	// its Q8_0 rounding, as a norm or SwiGLU does, for the q1_xq matvec
	// that reads it.
	if g != nil && f == infer.ActSigmoid && g != dst && g.cols == x.cols && b.xqOK() && b.n == 1 && x.cols%32 == 0 && rows >= 1 && g.rows >= 1 {
		if err := b.xqBuffers(dst); err != nil {
			b.fail(err)
			return
		}
		b.actQ8(actQ8Op{dst: dst, x: x, gate: g})
		b.wroteRounding(dst)
		return
	}
	defs := map[string]shaders.Const{"COLS": shaders.U32(x.cols), flag: shaders.Flag(true)}
	bufs := []binding{whole(b.batchBuf)}
	if dst == x {
		defs["ALIAS_X"] = shaders.Flag(true)
	} else {
		bufs = append(bufs, at(1, whole(x.buf)))
	}
	kind := "unary"
	if g == nil {
		defs["UNARY"] = shaders.Flag(true)
	} else {
		kind = "gate"
		defs["GATE"] = shaders.Flag(true)
		rows = min(rows, g.rows)
		switch {
		case g == dst:
			defs["ALIAS_G"] = shaders.Flag(true)
		default:
			bufs = append(bufs, at(2, whole(g.buf)))
		}
	}
	defs["XROWS"] = shaders.U32(rows)
	bufs = append(bufs, at(3, whole(dst.buf)))
	o := b.prepared(opKey{kind: kind, a: dst, b: x, c: g, i: int(f)}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("unary", defs)
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(x.cols, 256), min(rows, b.n), 1)
}

// vectorArg checks that w is a vector of n values held as f32 (F32, or a
// type dequantized at load) in one buffer.
func (b *Backend) vectorArg(name string, wI infer.Weight, n int) *weight {
	w := b.weightArg(name, wI)
	if w == nil {
		return nil
	}
	if w.k*w.m != n || len(w.chunks) != 1 {
		b.shapeErr("%s: %s is %s %v, want %d values", name, w.name, w.typ, w.shape, n)
		return nil
	}
	return w
}

func (b *Backend) DecayGate(dstT, alphaT infer.Tensor, biasW, aW infer.Weight) {
	if !b.ready() {
		return
	}
	dst, alpha := b.tensorArg("DecayGate dst", dstT), b.tensorArg("DecayGate alpha", alphaT)
	if dst == nil || alpha == nil {
		return
	}
	bias, a := b.vectorArg("DecayGate bias", biasW, alpha.cols), b.vectorArg("DecayGate a", aW, alpha.cols)
	if bias == nil || a == nil {
		return
	}
	if dst.cols != alpha.cols {
		b.shapeErr("DecayGate: dst %d, alpha %d columns", dst.cols, alpha.cols)
		return
	}
	rows := min(dst.rows, alpha.rows)
	defs := map[string]shaders.Const{"COLS": shaders.U32(alpha.cols), "XROWS": shaders.U32(rows), "DECAY": shaders.Flag(true)}
	bufs := []binding{whole(b.batchBuf)}
	if dst == alpha {
		defs["ALIAS_X"] = shaders.Flag(true)
	} else {
		bufs = append(bufs, at(1, whole(alpha.buf)))
	}
	bufs = append(bufs, at(3, whole(dst.buf)), at(4, whole(bias.chunks[0].buf)), at(5, whole(a.chunks[0].buf)))
	o := b.prepared(opKey{kind: "decaygate", a: dst, b: alpha, c: bias, d: a}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("unary", defs)
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(alpha.cols, 256), min(rows, b.n), 1)
}

func (b *Backend) L2Norm(dstT, xT infer.Tensor, group int, eps float32) {
	if !b.ready() {
		return
	}
	dst, x := b.tensorArg("L2Norm dst", dstT), b.tensorArg("L2Norm x", xT)
	if dst == nil || x == nil {
		return
	}
	if group <= 0 || x.cols%group != 0 || dst.cols != x.cols {
		b.shapeErr("L2Norm: groups of %d over rows of %d into %d", group, x.cols, dst.cols)
		return
	}
	rows := min(dst.rows, x.rows)
	inplace := dst == x
	wg := normThreads(group)
	o := b.prepared(opKey{kind: "l2norm", a: dst, b: x, i: group, f: eps}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("l2norm", map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "G": shaders.U32(group), "EPS": shaders.F32(eps / float32(group)),
			"INVSQRTG": shaders.F32(float32(1 / math.Sqrt(float64(group)))), "WG": shaders.U32(wg),
			"XROWS": shaders.U32(rows), "INPLACE": shaders.Flag(inplace)})
		bufs := []binding{whole(b.batchBuf)}
		if !inplace {
			bufs = append(bufs, at(1, whole(x.buf)))
		}
		return k, append(bufs, at(2, whole(dst.buf))), err
	})
	b.dispatch(o, x.cols/group, min(rows, b.n), 1)
}

// recurrentLayer checks that the state exists and has layer.
func (b *Backend) recurrentLayer(op string, layer int) bool {
	if b.rec == nil {
		b.fail(fmt.Errorf("gpu: %s before NewRecurrentState: %w", op, infer.ErrBadShape))
		return false
	}
	if layer < 0 || layer >= b.rec.spec.Layers {
		b.shapeErr("%s: recurrent layer %d of %d", op, layer, b.rec.spec.Layers)
		return false
	}
	return true
}

func (b *Backend) CausalConv(dstT, xT infer.Tensor, wI infer.Weight, layer int) {
	if !b.ready() {
		return
	}
	dst, x, w := b.tensorArg("CausalConv dst", dstT), b.tensorArg("CausalConv x", xT), b.weightArg("CausalConv", wI)
	if dst == nil || x == nil || w == nil || !b.recurrentLayer("CausalConv", layer) {
		return
	}
	s := b.rec.spec
	if w.k != s.ConvWidth || w.m != s.Channels || len(w.chunks) != 1 ||
		x.cols != s.Channels || dst.cols != s.Channels {
		b.shapeErr("CausalConv: %s %s %v, x %d and dst %d columns, state %+v", w.name, w.typ, w.shape, x.cols, dst.cols, s)
		return
	}
	rows := min(dst.rows, x.rows)
	alias := dst == x
	if b.rows {
		for _, run := range b.seqRuns {
			state, sb := b.slabBinding(b.rec.slabConv, b.rec.convStride, layer, run.slot), b.slotBatch[run.slot]
			o := b.prepared(opKey{kind: "convrun", a: dst, b: x, c: w, d: state, e: sb, i: layer}, func() (*kernel, []binding, error) {
				k, err := b.d.kernel("conv", map[string]shaders.Const{
					"CH": shaders.U32(s.Channels), "W": shaders.U32(s.ConvWidth), "XROWS": shaders.U32(rows), "ALIAS": shaders.Flag(alias),
					"RUN": shaders.Flag(true)})
				bufs := []binding{whole(sb)}
				if !alias {
					bufs = append(bufs, at(1, whole(x.buf)))
				}
				return k, append(bufs, at(2, whole(w.chunks[0].buf)), at(3, state), at(4, whole(dst.buf))), err
			})
			b.dispatch(o, ceilDiv(s.Channels, 64), 1, 1)
		}
		return
	}
	prev, state := b.step(b.rec.conv, b.rec.convPrev, b.rec.convBack, layer)
	o := b.prepared(opKey{kind: "conv", a: dst, b: x, c: w, d: prev, e: state, i: layer}, func() (*kernel, []binding, error) {
		pp := prev != state
		k, err := b.d.kernel("conv", map[string]shaders.Const{
			"CH": shaders.U32(s.Channels), "W": shaders.U32(s.ConvWidth), "XROWS": shaders.U32(rows), "ALIAS": shaders.Flag(alias),
			"PINGPONG": shaders.Flag(pp)})
		bufs := []binding{whole(b.batchBuf)}
		if !alias {
			bufs = append(bufs, at(1, whole(x.buf)))
		}
		bufs = append(bufs, at(2, whole(w.chunks[0].buf)), at(3, whole(state)), at(4, whole(dst.buf)))
		if pp {
			bufs = append(bufs, at(5, whole(prev)))
		}
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(s.Channels, 64), 1, 1)
}

// FuseDeltaNetInputs runs the input stage of a decoding step's DeltaNet
// layer as one dispatch (deltanet_in.wgsl) instead of eight: on the H200 a
// 27B token spent most of its time in such small dependent dispatches.
// Longer passes, and the unfused passes tests compare against, take the
// op sequence. A pass over one row of each of several sequences takes a
// dispatch per row, on its sequence's state (RUN).
func (b *Backend) FuseDeltaNetInputs(in infer.DeltaNetInputs) bool {
	runs := b.rows && b.oneRowRuns()
	if b.noFuse || b.n != 1 && !runs || b.rows && !runs {
		return false
	}
	var proj gateProjections
	if in.X != nil {
		var ok bool
		if proj, ok = b.gateProjections(in); !ok {
			return false
		}
	}
	if !b.ready() {
		return false
	}
	q, k, v := b.tensorArg("DeltaNetInputs q", in.Q), b.tensorArg("DeltaNetInputs k", in.K), b.tensorArg("DeltaNetInputs v", in.V)
	x, beta, alpha := b.tensorArg("DeltaNetInputs qkv", in.QKV), b.tensorArg("DeltaNetInputs beta", in.Beta), b.tensorArg("DeltaNetInputs alpha", in.Alpha)
	w := b.weightArg("DeltaNetInputs conv", in.Conv)
	if q == nil || k == nil || v == nil || x == nil || beta == nil || alpha == nil || w == nil || !b.recurrentLayer("DeltaNetInputs", in.Layer) {
		return true // the error is recorded: the pass fails at Commit
	}
	d, s := in.Spec, b.rec.spec
	bias, a := b.vectorArg("DeltaNetInputs bias", in.DTBias, d.VHeads), b.vectorArg("DeltaNetInputs a", in.SSMA, d.VHeads)
	if bias == nil || a == nil {
		return true
	}
	kd, vd := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
	if d.KHeads <= 0 || d.HeadDim <= 0 || x.cols != s.Channels || s.Channels != 2*kd+vd || w.k != s.ConvWidth || w.m != s.Channels ||
		len(w.chunks) != 1 || q.cols != kd || k.cols != kd || v.cols != vd || beta.cols != d.VHeads || alpha.cols != d.VHeads {
		b.shapeErr("DeltaNetInputs: %+v on qkv %d, q %d, k %d, v %d, beta %d, alpha %d columns, %s %v, state %+v",
			d, x.cols, q.cols, k.cols, v.cols, beta.cols, alpha.cols, w.name, w.shape, s)
		return true
	}
	wg := normThreads(d.HeadDim)
	// the gates and, with projections, their input and weights; the conv
	// state read and written
	gates := struct {
		beta, alpha, x *tensor
		proj           gateProjections
		prev, state    *wgpu.Buffer
	}{beta: beta, alpha: alpha, proj: proj}
	groups := 2*d.KHeads + d.VHeads + 1
	if in.X != nil {
		if gates.x = b.tensorArg("DeltaNetInputs x", in.X); gates.x == nil {
			return true
		}
		groups = 2*d.KHeads + 3*d.VHeads
	}
	// one dispatch on the state of the pass, or (runs) on every slot's in
	// the slab, a row per workgroup row
	if runs {
		gates.prev, gates.state = b.rec.slabConv[in.Layer], b.rec.slabConv[in.Layer]
	} else {
		gates.prev, gates.state = b.step(b.rec.conv, b.rec.convPrev, b.rec.convBack, in.Layer)
	}
	{
		state := gates.state
		o := b.prepared(opKey{kind: "deltanet_in", a: q, b: k, c: v, d: x, e: w, g: gates, i: in.Layer, f: in.Eps, v: keyVariant(boolInt(runs)) * keyRows}, func() (*kernel, []binding, error) {
			defs := map[string]shaders.Const{
				"S": shaders.U32(d.HeadDim), "KHEADS": shaders.U32(d.KHeads), "VHEADS": shaders.U32(d.VHeads), "CH": shaders.U32(s.Channels),
				"W": shaders.U32(s.ConvWidth), "WG": shaders.U32(wg), "SLAB": shaders.Flag(runs), "ROWS": shaders.Flag(runs),
				"EPS": shaders.F32(in.Eps / float32(d.HeadDim)), "INVSQRTG": shaders.F32(float32(1 / math.Sqrt(float64(d.HeadDim))))}
			bufs := []binding{whole(b.batchBuf), whole(x.buf), whole(w.chunks[0].buf), whole(state), whole(q.buf), whole(k.buf),
				whole(v.buf), whole(beta.buf), whole(alpha.buf), whole(bias.chunks[0].buf), whole(a.chunks[0].buf)}
			if gates.x != nil {
				defs["PROJ"], defs["XK4"] = shaders.Flag(true), shaders.U32(gates.x.cols/4)
				defs["XBF16"], defs["XF16"] = shaders.Flag(proj.mode == "BF16"), shaders.Flag(proj.mode == "F16")
				bufs = append(bufs, whole(gates.x.buf), whole(proj.wb.chunks[0].buf), whole(proj.wa.chunks[0].buf))
			}
			if gates.prev != state {
				defs["PINGPONG"] = shaders.Flag(true)
				bufs = append(bufs, at(14, whole(gates.prev)))
			}
			if runs {
				defs["CSTRIDE"] = shaders.U32(int(b.rec.convStride / 4))
				bufs = append(bufs, at(15, whole(b.rowsBuf)))
			}
			kern, err := b.d.kernel("deltanet_in", defs)
			return kern, bufs, err
		})
		b.dispatch(o, groups, max(1, boolInt(runs)*len(b.seqRuns)), 1)
	}
	return true
}

// gateProjections are the weights FuseDeltaNetInputs projects β and α
// with, and the rounding of their input, when it can take them into its
// dispatch: both dense (f32 rows in one chunk), VHEADS rows of x's width,
// an element-wise rounding of x, and a 64-thread workgroup (f32_matmul's
// tree) at least.
type gateProjections struct {
	wb, wa *weight
	mode   string
}

func (b *Backend) gateProjections(in infer.DeltaNetInputs) (gateProjections, bool) {
	wb, okb := in.WBeta.(*weight)
	wa, oka := in.WAlpha.(*weight)
	x, okx := in.X.(*tensor)
	if !okb || !oka || !okx || normThreads(in.Spec.HeadDim) < 64 || x.cols%4 != 0 {
		return gateProjections{}, false
	}
	mode, _ := activationMode(wb.typ)
	for _, w := range []*weight{wb, wa} {
		if m, _ := activationMode(w.typ); m != mode || w.q1() || len(w.twoBit) > 0 || len(w.chunks) != 1 || w.m != in.Spec.VHeads || w.k != x.cols {
			return gateProjections{}, false
		}
	}
	if mode != "" && mode != "F16" && mode != "BF16" {
		return gateProjections{}, false
	}
	return gateProjections{wb, wa, mode}, true
}

// deltaNetThreads is deltanet.wgsl's workgroup size: one thread per state
// column.
func deltaNetThreads(headDim int) int { return min(64, headDim) }

func (b *Backend) DeltaNet(dstT, qT, kT, vT, gT, betaT infer.Tensor, layer int, d infer.DeltaNetSpec) {
	if !b.ready() {
		return
	}
	dst, q, k := b.tensorArg("DeltaNet dst", dstT), b.tensorArg("DeltaNet q", qT), b.tensorArg("DeltaNet k", kT)
	v, g, beta := b.tensorArg("DeltaNet v", vT), b.tensorArg("DeltaNet g", gT), b.tensorArg("DeltaNet beta", betaT)
	if dst == nil || q == nil || k == nil || v == nil || g == nil || beta == nil || !b.recurrentLayer("DeltaNet", layer) {
		return
	}
	s := b.rec.spec
	kd, vd := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
	if d.KHeads <= 0 || d.VHeads%max(d.KHeads, 1) != 0 || d.HeadDim <= 0 || d.VHeads != s.VHeads || d.HeadDim != s.HeadDim ||
		q.cols != kd || k.cols != kd || v.cols != vd || dst.cols != vd || g.cols != d.VHeads || beta.cols != d.VHeads {
		b.shapeErr("DeltaNet: %+v on q %d, k %d, v %d, dst %d, g %d, beta %d columns, state %+v",
			d, q.cols, k.cols, v.cols, dst.cols, g.cols, beta.cols, s)
		return
	}
	for _, in := range []*tensor{q, k, v, g, beta} {
		if in == dst {
			b.shapeErr("DeltaNet: dst %s aliases an input", dst.name)
			return
		}
	}
	rows := min(dst.rows, q.rows, k.rows, v.rows, g.rows, beta.rows)
	if b.rows {
		b.deltaNetRuns(dst, q, k, v, g, beta, rows, layer, d)
		return
	}
	if min(rows, b.n) >= b.deltaChunkMin {
		state, _ := b.step(b.rec.delta, nil, b.rec.deltaBack, layer)
		b.deltaNetChunked(dst, q, k, v, g, beta, state, rows, layer, d)
		return
	}
	prev, state := b.step(b.rec.delta, b.rec.deltaPrev, b.rec.deltaBack, layer)
	// the state's buffers are part of the key: they change roles
	bs := struct {
		beta        *tensor
		prev, state *wgpu.Buffer
	}{beta, prev, state}
	if lp := deltaStepLanes(d.HeadDim); min(rows, b.n) == 1 && lp > 0 {
		cpw := 256 / lp
		o := b.prepared(opKey{kind: "deltanet_step", a: dst, b: q, c: k, d: v, e: g, g: bs, i: layer}, func() (*kernel, []binding, error) {
			kern, err := b.d.kernel("deltanet_step", map[string]shaders.Const{
				"D": shaders.U32(d.HeadDim), "KHEADS": shaders.U32(d.KHeads), "VHEADS": shaders.U32(d.VHeads),
				"SCALE": shaders.F32(float32(1 / math.Sqrt(float64(d.HeadDim)))), "L": shaders.U32(d.HeadDim / 4),
				"LP": shaders.U32(lp), "CPW": shaders.U32(cpw), "PINGPONG": shaders.Flag(prev != state)})
			return kern, stateBindings([]binding{whole(b.batchBuf), whole(q.buf), whole(k.buf), whole(v.buf), whole(g.buf), whole(beta.buf),
				whole(state), whole(dst.buf)}, prev, state), err
		})
		b.dispatch(o, ceilDiv(d.HeadDim, cpw), d.VHeads, 1)
		return
	}
	wg := deltaNetThreads(d.HeadDim)
	o := b.prepared(opKey{kind: "deltanet", a: dst, b: q, c: k, d: v, e: g, g: bs, i: layer}, func() (*kernel, []binding, error) {
		kern, err := b.d.kernel("deltanet", map[string]shaders.Const{
			"D": shaders.U32(d.HeadDim), "KHEADS": shaders.U32(d.KHeads), "VHEADS": shaders.U32(d.VHeads),
			"XROWS": shaders.U32(rows), "SCALE": shaders.F32(float32(1 / math.Sqrt(float64(d.HeadDim)))), "WG": shaders.U32(wg),
			"PINGPONG": shaders.Flag(prev != state)})
		return kern, stateBindings([]binding{whole(b.batchBuf), whole(q.buf), whole(k.buf), whole(v.buf), whole(g.buf), whole(beta.buf),
			whole(state), whole(dst.buf)}, prev, state), err
	})
	b.dispatch(o, ceilDiv(d.HeadDim, wg), d.VHeads, 1)
}

// deltaNetRuns encodes a DeltaNet over rows of several sequences: a
// dispatch of deltanet.wgsl per sequence's run, on its slot's state.
func (b *Backend) deltaNetRuns(dst, q, k, v, g, beta *tensor, rows, layer int, d infer.DeltaNetSpec) {
	wg := deltaNetThreads(d.HeadDim)
	if lp := deltaStepLanes(d.HeadDim); b.oneRowRuns() && lp > 0 {
		// a row per sequence: a decoding step's kernel over all of them,
		// each on its slot's state in the slab
		cpw := 256 / lp
		slab := b.rec.slabDelta[layer]
		o := b.prepared(opKey{kind: "deltanet_stepslab", a: dst, b: q, c: k, d: v, e: g, g: chunkKey{d, slab}, f: 0, i: layer, v: keyRows}, func() (*kernel, []binding, error) {
			kern, err := b.d.kernel("deltanet_step", map[string]shaders.Const{
				"D": shaders.U32(d.HeadDim), "KHEADS": shaders.U32(d.KHeads), "VHEADS": shaders.U32(d.VHeads),
				"SCALE": shaders.F32(float32(1 / math.Sqrt(float64(d.HeadDim)))), "L": shaders.U32(d.HeadDim / 4),
				"LP": shaders.U32(lp), "CPW": shaders.U32(cpw), "SLAB": shaders.Flag(true), "ROWS": shaders.Flag(true),
				"SSTRIDE": shaders.U32(int(b.rec.deltaStride / 16))})
			return kern, []binding{whole(b.batchBuf), whole(q.buf), whole(k.buf), whole(v.buf), whole(g.buf), whole(beta.buf),
				whole(slab), whole(dst.buf), at(15, whole(b.rowsBuf))}, err
		})
		b.dispatch(o, ceilDiv(d.HeadDim, cpw), d.VHeads, len(b.seqRuns))
		return
	}
	for _, run := range b.seqRuns {
		state, sb := b.slabBinding(b.rec.slabDelta, b.rec.deltaStride, layer, run.slot), b.slotBatch[run.slot]
		bs := struct {
			beta  *tensor
			state binding
			slot  *wgpu.Buffer
		}{beta, state, sb}
		o := b.prepared(opKey{kind: "deltanetrun", a: dst, b: q, c: k, d: v, e: g, g: bs, i: layer}, func() (*kernel, []binding, error) {
			kern, err := b.d.kernel("deltanet", map[string]shaders.Const{
				"D": shaders.U32(d.HeadDim), "KHEADS": shaders.U32(d.KHeads), "VHEADS": shaders.U32(d.VHeads),
				"XROWS": shaders.U32(rows), "SCALE": shaders.F32(float32(1 / math.Sqrt(float64(d.HeadDim)))), "WG": shaders.U32(wg),
				"RUN": shaders.Flag(true)})
			return kern, []binding{whole(sb), whole(q.buf), whole(k.buf), whole(v.buf), whole(g.buf), whole(beta.buf),
				state, whole(dst.buf)}, err
		})
		b.dispatch(o, ceilDiv(d.HeadDim, wg), d.VHeads, 1)
	}
}

// stateBindings adds the state read (binding 8) to a DeltaNet step's
// bindings where it is not the one written (ping-pong).
func stateBindings(bufs []binding, prev, state *wgpu.Buffer) []binding {
	if prev != state {
		bufs = append(bufs, at(8, whole(prev)))
	}
	return bufs
}

// deltaStepLanes is deltanet_step.wgsl's threads per state column for
// head size hd (hd/4 rounded up to a power of two), or 0 where that kernel
// does not apply (hd not a multiple of 4, or a column wider than its
// workgroup).
func deltaStepLanes(hd int) int {
	if hd%4 != 0 || hd/4 > 256 {
		return 0
	}
	lp := 1
	for lp < hd/4 {
		lp *= 2
	}
	return lp
}

// Chunked DeltaNet: deltaChunk tokens per chunk, deltaChunkCols state
// columns per workgroup (deltanet_prep.wgsl, deltanet_chunk.wgsl).
const (
	deltaChunk     = 16
	deltaChunkCols = 16
)

// DefaultDeltaChunkMin is the batch from which DeltaNet runs in chunked
// form: below it the per-column token loop has too few tokens to lose.
const DefaultDeltaChunkMin = 32

// deltaNetChunked encodes the chunked form: the state-free prep over all
// chunks at once, then the pass over the chunks in order.
func (b *Backend) deltaNetChunked(dst, q, k, v, g, beta *tensor, state *wgpu.Buffer, rows, layer int, d infer.DeltaNetSpec) {
	nch := ceilDiv(rows, deltaChunk)
	per := 2*deltaChunk*deltaChunk + deltaChunk
	if dst.prep == nil {
		buf, err := b.d.newBuffer(dst.name+".deltaprep", uint64(4*d.VHeads*nch*per), storageUsage)
		if err != nil {
			b.fail(err)
			return
		}
		dst.prep = buf
	}
	if dst.prep.GetSize() < uint64(4*d.VHeads*nch*per) {
		b.shapeErr("DeltaNet: %s's chunk scratch was sized for fewer value heads", dst.name)
		return
	}
	defs := func() map[string]shaders.Const {
		return map[string]shaders.Const{
			"C": shaders.U32(deltaChunk), "JB": shaders.U32(deltaChunkCols), "D": shaders.U32(d.HeadDim),
			"KHEADS": shaders.U32(d.KHeads), "VHEADS": shaders.U32(d.VHeads), "XROWS": shaders.U32(rows), "NCH": shaders.U32(nch),
			"SCALE": shaders.F32(float32(1 / math.Sqrt(float64(d.HeadDim))))}
	}
	prep := b.prepared(opKey{kind: "deltaprep", a: dst, b: q, c: k, e: g, g: beta, d: d}, func() (*kernel, []binding, error) {
		kern, err := b.d.kernel("deltanet_prep", defs())
		return kern, []binding{whole(b.batchBuf), whole(q.buf), whole(k.buf), whole(g.buf), whole(beta.buf), whole(dst.prep)}, err
	})
	b.dispatch(prep, ceilDiv(min(rows, b.n), deltaChunk), d.VHeads, 1)
	o := b.prepared(opKey{kind: "deltachunk", a: dst, b: q, c: k, d: v, e: beta, g: chunkKey{d, state}, i: layer}, func() (*kernel, []binding, error) {
		kern, err := b.d.kernel("deltanet_chunk", defs())
		return kern, []binding{whole(b.batchBuf), whole(q.buf), whole(k.buf), whole(v.buf), whole(beta.buf), whole(dst.prep),
			whole(state), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(d.HeadDim, deltaChunkCols), d.VHeads, 1)
}

// chunkKey keys a chunked DeltaNet op by its spec and the state buffer,
// which ping-pong (step) moves between a layer's pair.
type chunkKey struct {
	d     infer.DeltaNetSpec
	state *wgpu.Buffer
}

// maxHadamardBlock bounds the FWHT block held in workgroup memory (16 KiB).
const maxHadamardBlock = 4096

func (b *Backend) Hadamard(dstT, xT infer.Tensor, r infer.Rotation) {
	if !b.ready() {
		return
	}
	dst, x := b.tensorArg("Hadamard dst", dstT), b.tensorArg("Hadamard x", xT)
	if dst == nil || x == nil {
		return
	}
	if r.Block < 2 || r.Block&(r.Block-1) != 0 || r.Block > maxHadamardBlock || x.cols%r.Block != 0 || dst.cols != x.cols {
		b.shapeErr("Hadamard: blocks of %d over rows of %d into %d", r.Block, x.cols, dst.cols)
		return
	}
	var signs *weight
	if r.Signs != nil {
		if signs = b.vectorArg("Hadamard signs", r.Signs, x.cols); signs == nil {
			return
		}
	}
	hd, kh := r.Regroup.HeadDim, r.Regroup.KHeads
	regroup := hd > 0
	if regroup && (kh <= 0 || x.cols%hd != 0 || (x.cols/hd)%kh != 0) {
		b.shapeErr("Hadamard: regrouping %d K heads of %d over rows of %d", kh, hd, x.cols)
		return
	}
	rows := min(dst.rows, x.rows)
	src := x.buf
	if regroup && dst == x {
		// The permutation reads across blocks: copy x aside first.
		if x.tmp == nil {
			buf, err := b.d.newBuffer(x.name+".tmp", x.buf.GetSize(), storageUsage)
			if err != nil {
				b.fail(err)
				return
			}
			x.tmp = buf
		}
		cp := b.prepared(opKey{kind: "copytmp", a: x}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("elementwise", map[string]shaders.Const{
				"COLS": shaders.U32(x.cols), "XROWS": shaders.U32(x.rows), "ALIAS_A": shaders.Flag(true), "COPY": shaders.Flag(true)})
			return k, []binding{whole(b.batchBuf), whole(x.buf), whole(x.tmp)}, err
		})
		b.dispatch(cp, ceilDiv(x.cols, 256), min(x.rows, b.n), 1)
		src = x.tmp
	}
	inplace := src == dst.buf
	rep := 1
	if regroup {
		rep = x.cols / hd / kh
	}
	wg := min(256, r.Block/2)
	defs := map[string]shaders.Const{
		"COLS": shaders.U32(x.cols), "B": shaders.U32(r.Block), "WG": shaders.U32(wg), "XROWS": shaders.U32(rows),
		"SCALE": shaders.F32(float32(1 / math.Sqrt(float64(r.Block)))), "HD": shaders.U32(max(hd, 1)), "KH": shaders.U32(max(kh, 1)),
		"REP": shaders.U32(rep), "REGROUP": shaders.Flag(regroup), "INPLACE": shaders.Flag(inplace),
		"SIGNS": shaders.Flag(signs != nil), "SIGNS_BEFORE": shaders.Flag(signs != nil && !r.SignsAfter),
		"SIGNS_AFTER": shaders.Flag(signs != nil && r.SignsAfter)}
	bufs := []binding{whole(b.batchBuf)}
	if !inplace {
		bufs = append(bufs, at(1, whole(src)))
	}
	if signs != nil {
		bufs = append(bufs, at(2, whole(signs.chunks[0].buf)))
	}
	bufs = append(bufs, at(3, whole(dst.buf)))
	o := b.prepared(opKey{kind: "hadamard", a: dst, b: x, c: signs, d: r.Regroup, i: r.Block, f: float32(boolInt(r.SignsAfter))}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("fwht", defs)
		return k, bufs, err
	})
	b.dispatch(o, x.cols/r.Block, min(rows, b.n), 1)
}
