package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// The ops of recurrent (Gated DeltaNet) layers. Each follows llama.cpp's CPU
// kernels down to the order of their float operations: the gates through
// libm's expf and logf, SiLU through ggml's vectorised exp, the convolution
// as an FMA chain over the kernel taps, and the delta rule as
// ggml_gated_delta_net computes it, with its dot products summed the way
// ggml_vec_dot_f32 does on AVX-512 (dotF32).

// recurrentState holds, for each recurrent layer, the last ConvWidth−1
// inputs of its convolution (oldest first) and the delta-rule matrices of
// its value heads, each stored transposed as ggml keeps them: element
// [j·HeadDim + i] is S[i][j], so that a column of S is contiguous.
type recurrentState struct {
	spec  infer.RecurrentSpec
	data  []float32   // the whole state, in RecurrentSpec's layout
	conv  [][]float32 // per layer: (ConvWidth−1)·Channels values
	delta [][]float32 // per layer: VHeads·HeadDim² values
}

func (b *Backend) NewRecurrentState(spec infer.RecurrentSpec) error {
	b.rs, b.seqs = recurrentState{}, nil
	if spec.Layers == 0 {
		return nil
	}
	if spec.Layers < 0 || spec.Channels <= 0 || spec.ConvWidth < 1 || spec.VHeads <= 0 || spec.HeadDim <= 0 ||
		spec.Floats() > 1<<34 {
		return fmt.Errorf("%w: recurrent state %+v", infer.ErrBadShape, spec)
	}
	rs := newRecurrentState(spec)
	b.rs, b.seqs = rs, []recurrentState{rs}
	for w := range b.deltaScratch {
		b.deltaScratch[w] = make([]float32, spec.HeadDim)
	}
	return nil
}

// NewSeqStates keeps n recurrent states for passes over rows (Row.Seq),
// slot 0 being b.rs.
func (b *Backend) NewSeqStates(n int) error {
	if b.inPass {
		return fmt.Errorf("cpu backend: NewSeqStates during a pass")
	}
	spec := b.rs.spec
	if n < 1 || spec.Layers == 0 || int64(n)*spec.Floats() > 1<<36 {
		return fmt.Errorf("%w: %d recurrent states of %+v", infer.ErrBadShape, n, spec)
	}
	seqs := []recurrentState{b.rs}
	for len(seqs) < n {
		if len(seqs) < len(b.seqs) {
			clear(b.seqs[len(seqs)].data)
			seqs = append(seqs, b.seqs[len(seqs)])
			continue
		}
		seqs = append(seqs, newRecurrentState(spec))
	}
	b.seqs = seqs
	return nil
}

// newRecurrentState allocates a zero state of spec (checked).
func newRecurrentState(spec infer.RecurrentSpec) recurrentState {
	rs := recurrentState{spec: spec, data: make([]float32, spec.Floats())}
	convLen := (spec.ConvWidth - 1) * spec.Channels
	per := int(spec.LayerFloats())
	for l := range spec.Layers {
		layer := rs.data[l*per : (l+1)*per]
		rs.conv = append(rs.conv, layer[:convLen])
		rs.delta = append(rs.delta, layer[convLen:])
	}
	return rs
}

// seqRun is a run of a pass's consecutive rows of one sequence's state.
type seqRun struct {
	state   recurrentState
	row0, n int
	// zero: the run's first row is at position 0, so the state starts
	// empty
	zero bool
}

// stateRuns splits the pass's rows into runs of one state each: the whole
// batch on b.rs in a pass of one sequence, the rows of each Row.Seq in a
// pass over rows.
func (b *Backend) stateRuns(op string) ([]seqRun, bool) {
	b.runs = b.runs[:0]
	if !b.inRows {
		b.runs = append(b.runs, seqRun{state: b.rs, n: b.n, zero: b.batch.Pos == 0})
		return b.runs, true
	}
	for i := 0; i < b.n; {
		r := b.rows[i]
		if r.Seq < 0 || r.Seq >= len(b.seqs) {
			b.fail(fmt.Errorf("%w: %s on a row of sequence state %d, the backend keeps %d (NewSeqStates)", infer.ErrBadShape, op, r.Seq, len(b.seqs)))
			return nil, false
		}
		j := i + 1
		for j < b.n && b.rows[j].Seq == r.Seq {
			j++
		}
		b.runs = append(b.runs, seqRun{state: b.seqs[r.Seq], row0: i, n: j - i, zero: r.Pos == 0})
		i = j
	}
	return b.runs, true
}

func (b *Backend) ReadRecurrentState(dst []float32) error {
	if b.inPass {
		return fmt.Errorf("cpu backend: ReadRecurrentState during a pass")
	}
	if len(dst) != len(b.rs.data) {
		return fmt.Errorf("%w: ReadRecurrentState into %d floats, the state has %d", infer.ErrBadShape, len(dst), len(b.rs.data))
	}
	copy(dst, b.rs.data)
	return nil
}

func (b *Backend) WriteRecurrentState(src []float32) error {
	if b.inPass {
		return fmt.Errorf("cpu backend: WriteRecurrentState during a pass")
	}
	if len(src) != len(b.rs.data) {
		return fmt.Errorf("%w: WriteRecurrentState of %d floats, the state has %d", infer.ErrBadShape, len(src), len(b.rs.data))
	}
	copy(b.rs.data, src)
	return nil
}

func (b *Backend) CopyCols(dst, src infer.Tensor, c infer.Cols) {
	if !b.ok() {
		return
	}
	d, s := b.tensorOf("CopyCols", dst), b.tensorOf("CopyCols", src)
	if d == nil || s == nil {
		return
	}
	last := c.Src + (c.Count-1)*c.Stride + c.Width // one past the last column read
	if c.Count < 1 || c.Width < 1 || c.Dst < 0 || c.Src < 0 || (c.Count > 1 && c.Stride < c.Width) ||
		last > s.cols || c.Dst+c.Count*c.Width > d.cols || d == s || b.active(d) != b.active(s) {
		b.fail(fmt.Errorf("%w: CopyCols %+v of %s (%d×%d) into %s (%d×%d)", infer.ErrBadShape, c, s.name, s.rows, s.cols, d.name, d.rows, d.cols))
		return
	}
	for r := range b.active(s) {
		sr, dr := s.row(r), d.row(r)
		for h := range c.Count {
			copy(dr[c.Dst+h*c.Width:c.Dst+(h+1)*c.Width], sr[c.Src+h*c.Stride:])
		}
	}
}

// expf and logf are glibc's single-precision functions, which ggml's scalar
// unary ops call (quant.GlibcExpf and quant.GlibcLogf: not the correctly
// rounded values, which differ from glibc's now and then).
func expf(x float32) float32 { return quant.GlibcExpf(x) }
func logf(x float32) float32 { return quant.GlibcLogf(x) }

// sigmoid is ggml's op_sigmoid, 1/(1 + expf(−x)).
func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// softplus is ggml's op_softplus: logf(1 + expf(x)), or x above 20.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return logf(1 + expf(x))
}

// siluRow applies ggml_vec_silu_f32 to one row: full blocks of 16 from the
// row's start through ggml_v_silu, the tail through libm's expf. That is
// quant.SwiGLU's computation of silu(x)·up with up = 1 (exact), which runs
// it vectorised; the blocks start at the row's first value, so the caller
// passes whole ggml rows.
func (b *Backend) siluRow(dst, x []float32) {
	if len(b.ones) < len(x) {
		b.ones = make([]float32, len(x))
		for i := range b.ones {
			b.ones[i] = 1
		}
	}
	quant.SwiGLU(dst, x, b.ones[:len(x)])
}

// actRow sets dst = f(x) over one row.
func (b *Backend) actRow(dst, x []float32, f infer.Act) {
	switch f {
	case infer.ActSiLU:
		b.siluRow(dst, x)
	case infer.ActSigmoid:
		for i, v := range x {
			dst[i] = sigmoid(v)
		}
	case infer.ActSoftplus:
		for i, v := range x {
			dst[i] = softplus(v)
		}
	case infer.ActGELU:
		for i, v := range x {
			dst[i] = gelu(v)
		}
	}
}

func validAct(f infer.Act) bool {
	return f == infer.ActSiLU || f == infer.ActSigmoid || f == infer.ActSoftplus || f == infer.ActGELU
}

// geluTable is ggml's ggml_table_gelu_f16: for each f16 value h, the f16
// of 0.5·h·(1+tanh(√(2/π)·h·(1+0.044715·h²))) computed in f32, 1+a·h·h
// contracted into one FMA as GCC compiles ggml_gelu_f32.
var geluTable = sync.OnceValue(func() []uint16 {
	const a, s = float32(0.044715), float32(0.79788456080286535587989211986876)
	t := make([]uint16, 1<<16)
	for i := range t {
		h := quant.F16ToF32(uint16(i))
		inner := quant.FMA32(float32(a*h), h, 1)
		th := float32(math.Tanh(float64(float32(float32(s*h) * inner))))
		t[i] = quant.F32ToF16(float32(0.5*h) * (1 + th))
	}
	return t
})

// gelu is ggml_vec_gelu_f32 with GGML_GELU_FP16 (ggml's default).
func gelu(x float32) float32 { return geluWith(geluTable(), x) }

// geluWith is gelu with the table in hand.
func geluWith(t []uint16, x float32) float32 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	return quant.F16ToF32(t[quant.F32ToF16(x)])
}

// gegluJob computes x·gelu(gate) over shares [lo, hi) of addBlock
// elements, as ggml_mul(x, ggml_gelu(gate)).
type gegluJob struct {
	x, gate, dst []float32
	table        []uint16
}

func (j *gegluJob) run(lo, hi, _ int) {
	lo, hi = lo*addBlock, min(hi*addBlock, len(j.dst))
	x, g, d := j.x[lo:hi], j.gate[lo:hi], j.dst[lo:hi]
	for i := range d {
		d[i] = x[i] * geluWith(j.table, g[i])
	}
}

// Unary applies f to each active row; SiLU's blocks of 16 start at each
// row's first column, as ggml's do over a contiguous row.
func (b *Backend) Unary(dst, x infer.Tensor, f infer.Act) {
	if !b.ok() {
		return
	}
	d, cx := b.tensorOf("Unary", dst), b.tensorOf("Unary", x)
	if d == nil || cx == nil {
		return
	}
	if !validAct(f) || d.cols != cx.cols || b.active(d) != b.active(cx) {
		b.fail(fmt.Errorf("%w: Unary %v of %s (%d×%d) into %s (%d×%d)", infer.ErrBadShape, f, cx.name, cx.rows, cx.cols, d.name, d.rows, d.cols))
		return
	}
	for r := range b.active(cx) {
		b.actRow(d.row(r), cx.row(r), f)
	}
}

// Gate sets dst = x ⊙ f(g). llama.cpp applies SiLU to the DeltaNet gate z
// viewed as rows of one head each; its blocks of 16 line up with the
// tensor's rows whenever the head dimension is a multiple of 16, as in
// every qwen35 model.
func (b *Backend) Gate(dst, x, g infer.Tensor, f infer.Act) {
	if !b.ok() {
		return
	}
	d, cx, cg := b.tensorOf("Gate", dst), b.tensorOf("Gate", x), b.tensorOf("Gate", g)
	if d == nil || cx == nil || cg == nil {
		return
	}
	if !validAct(f) || d.cols != cx.cols || cg.cols != cx.cols || b.active(d) != b.active(cx) || b.active(cg) != b.active(cx) {
		b.fail(fmt.Errorf("%w: Gate %v of %s by %s into %s", infer.ErrBadShape, f, cx.name, cg.name, d.name))
		return
	}
	if f == infer.ActGELU {
		// Elementwise, so any split rounds as ggml's: shared out
		// across the threads (Gemma's FFN runs it over 6912·tokens).
		n := b.active(cx) * cx.cols
		b.geglu = gegluJob{x: cx.data[:n], gate: cg.data[:n], dst: d.data[:n], table: geluTable()}
		b.parallel((n+addBlock-1)/addBlock, rowGrain, &b.geglu)
		b.geglu = gegluJob{}
		return
	}
	for r := range b.active(cx) {
		gr, xr, dr := cg.row(r), cx.row(r), d.row(r)
		if f == infer.ActSiLU {
			// ggml_mul(x, silu(g)) is ggml_vec_swiglu_f32's silu(g)·x.
			quant.SwiGLU(dr, gr, xr)
			continue
		}
		if len(b.gateRow) < len(gr) {
			b.gateRow = make([]float32, len(gr))
		}
		fg := b.gateRow[:len(gr)]
		b.actRow(fg, gr, f)
		for i := range dr {
			dr[i] = xr[i] * fg[i]
		}
	}
}

// DecayGate is llama.cpp's ggml_add, ggml_softplus and ggml_mul in turn.
func (b *Backend) DecayGate(dst, alpha infer.Tensor, bias, a infer.Weight) {
	if !b.ok() {
		return
	}
	d, cx := b.tensorOf("DecayGate", dst), b.tensorOf("DecayGate", alpha)
	cb, ca := b.weightOf("DecayGate", bias), b.weightOf("DecayGate", a)
	if d == nil || cx == nil || cb == nil || ca == nil {
		return
	}
	if !isVector(cb, cx.cols) || !isVector(ca, cx.cols) || d.cols != cx.cols || b.active(d) != b.active(cx) {
		b.fail(fmt.Errorf("%w: DecayGate of %s (%d cols) with %s (%v %s), %s (%v %s)", infer.ErrBadShape, cx.name, cx.cols, cb.name, cb.shape, cb.typ, ca.name, ca.shape, ca.typ))
		return
	}
	bf, af := f32s(cb.data), f32s(ca.data)
	for r := range b.active(cx) {
		xr, dr := cx.row(r), d.row(r)
		for i, v := range xr {
			dr[i] = softplus(v+bf[i]) * af[i]
		}
	}
}

// isVector reports whether w is an F32 vector of n values.
func isVector(w *weight, n int) bool { return w.typ == gguf.F32 && w.rows == 1 && w.cols == n }

// L2Norm is build_gdn_l2_norm: ggml_rms_norm with eps/group (the sum of
// squares in f64 of f32 products, mean and scale in f32), then ggml_scale by
// 1/√group.
func (b *Backend) L2Norm(dst, x infer.Tensor, group int, eps float32) {
	if !b.ok() {
		return
	}
	d, cx := b.tensorOf("L2Norm", dst), b.tensorOf("L2Norm", x)
	if d == nil || cx == nil {
		return
	}
	if group < 1 || cx.cols%group != 0 || d.cols != cx.cols || b.active(d) != b.active(cx) || !(eps >= 0) {
		b.fail(fmt.Errorf("%w: L2Norm of %s (%d cols) in groups of %d, eps %g", infer.ErrBadShape, cx.name, cx.cols, group, eps))
		return
	}
	n := float32(group)
	geps := eps / n
	post := 1 / float32(math.Sqrt(float64(n)))
	for r := range b.active(cx) {
		xr, dr := cx.row(r), d.row(r)
		for s := 0; s < len(xr); s += group {
			xs, ds := xr[s:s+group], dr[s:s+group]
			var sum float64
			for _, v := range xs {
				sum += float64(v * v)
			}
			mean := float32(sum / float64(group))
			scale := 1 / float32(math.Sqrt(float64(mean+geps)))
			for i, v := range xs {
				ds[i] = v * scale * post
			}
		}
	}
}

// CausalConv is ggml_ssm_conv over the layer's conv state followed by the
// batch (each sequence's rows over its own state, in a pass over rows):
// each output is an FMA chain over the kernel's taps, oldest first (GCC
// contracts ggml's sumf += s·c). Channels are independent, so the work is
// split over them.
func (b *Backend) CausalConv(dst, x infer.Tensor, w infer.Weight, layer int) {
	if !b.ok() {
		return
	}
	d, cx, cw := b.tensorOf("CausalConv", dst), b.tensorOf("CausalConv", x), b.weightOf("CausalConv", w)
	if d == nil || cx == nil || cw == nil {
		return
	}
	s := b.rs.spec
	if layer < 0 || layer >= s.Layers || cw.typ != gguf.F32 || cw.cols != s.ConvWidth || cw.rows != s.Channels ||
		cx.cols != s.Channels || d.cols != s.Channels || b.active(cx) != b.n || b.active(d) != b.n || d == cx {
		b.fail(fmt.Errorf("%w: CausalConv layer %d of %s (%d×%d) by %s (%v %s) into %s, state %+v", infer.ErrBadShape, layer, cx.name, cx.rows, cx.cols, cw.name, cw.shape, cw.typ, d.name, s))
		return
	}
	runs, ok := b.stateRuns("CausalConv")
	if !ok {
		return
	}
	b.conv = convJob{x: cx, dst: d, w: f32s(cw.data), runs: runs, layer: layer, width: s.ConvWidth}
	b.parallel(s.Channels, 256, &b.conv)
}

// convJob convolves channels [lo, hi) over each run of rows and shifts
// their state.
type convJob struct {
	x, dst *tensor
	w      []float32 // [channel][tap]
	runs   []seqRun  // each conv state: [row][channel], width−1 rows
	layer  int
	width  int
}

func (j *convJob) run(lo, hi, _ int) {
	keep := j.width - 1
	ch := j.x.cols
	for _, r := range j.runs {
		state := r.state.conv[j.layer]
		// u(t) is the t-th input of the run's window: the state's rows,
		// then the run's.
		u := func(t, c int) float32 {
			if t < keep {
				return state[t*ch+c]
			}
			return j.x.data[(r.row0+t-keep)*ch+c]
		}
		for c := lo; c < hi; c++ {
			if r.zero {
				for t := range keep {
					state[t*ch+c] = 0
				}
			}
			wc := j.w[c*j.width : (c+1)*j.width]
			for i := range r.n {
				var sum float32
				for t, wt := range wc {
					sum = quant.FMA32(u(i+t, c), wt, sum)
				}
				j.dst.data[(r.row0+i)*ch+c] = sum
			}
			// The new state is the window's last width−1 inputs.
			for t := range keep {
				state[t*ch+c] = u(r.n+t, c)
			}
		}
	}
}

// DeltaNet is ggml_gated_delta_net with one snapshot, which llama.cpp's CPU
// build runs for one token and for prompts alike (the fused path): for each
// value head, token by token,
//
//	M    = expf(g)·M                       (M = Sᵀ, ggml_vec_scale_f32)
//	δ_j  = (v_j − dot(M_j, k))·β            (ggml_vec_dot_f32)
//	M_j += δ_j·k                            (ggml_vec_mad_f32: one FMA each)
//	o_j  = dot(M_j, q)·(1/√HeadDim)
//
// The value heads (of each sequence's run of rows, in a pass over rows)
// are independent and split over the workers.
func (b *Backend) DeltaNet(dst, q, k, v, g, beta infer.Tensor, layer int, d infer.DeltaNetSpec) {
	if !b.ok() {
		return
	}
	cd, cq, ck, cv := b.tensorOf("DeltaNet", dst), b.tensorOf("DeltaNet", q), b.tensorOf("DeltaNet", k), b.tensorOf("DeltaNet", v)
	cg, cb := b.tensorOf("DeltaNet", g), b.tensorOf("DeltaNet", beta)
	if cd == nil || cq == nil || ck == nil || cv == nil || cg == nil || cb == nil {
		return
	}
	s := b.rs.spec
	kw, vw := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
	bad := d.KHeads < 1 || d.VHeads < 1 || d.VHeads%d.KHeads != 0 || d.HeadDim != s.HeadDim || d.VHeads != s.VHeads ||
		layer < 0 || layer >= s.Layers || cq.cols != kw || ck.cols != kw || cv.cols != vw || cd.cols != vw ||
		cg.cols != d.VHeads || cb.cols != d.VHeads || cd == cq || cd == ck || cd == cv
	for _, t := range []*tensor{cd, cq, ck, cv, cg, cb} {
		bad = bad || b.active(t) != b.n
	}
	if bad {
		b.fail(fmt.Errorf("%w: DeltaNet layer %d %+v of q %s (%d cols), k %s (%d), v %s (%d), g %s (%d), beta %s (%d) into %s (%d), state %+v",
			infer.ErrBadShape, layer, d, cq.name, cq.cols, ck.name, ck.cols, cv.name, cv.cols, cg.name, cg.cols, cb.name, cb.cols, cd.name, cd.cols, s))
		return
	}
	runs, ok := b.stateRuns("DeltaNet")
	if !ok {
		return
	}
	b.delta = deltaJob{b: b, q: cq, k: ck, v: cv, g: cg, beta: cb, dst: cd, runs: runs, layer: layer, d: d}
	b.parallel(len(runs)*d.VHeads, 1, &b.delta)
}

// deltaJob runs the delta rule of (run, value head) pairs
// [lo, hi), run-major.
type deltaJob struct {
	b                     *Backend
	q, k, v, g, beta, dst *tensor
	runs                  []seqRun
	layer                 int
	d                     infer.DeltaNetSpec
}

func (j *deltaJob) run(lo, hi, worker int) {
	D := j.d.HeadDim
	scale := 1 / float32(math.Sqrt(float64(D)))
	delta := j.b.deltaScratch[worker][:D]
	for i := lo; i < hi; i++ {
		r, h := j.runs[i/j.d.VHeads], i%j.d.VHeads
		M := r.state.delta[j.layer][h*D*D : (h+1)*D*D]
		if r.zero {
			clear(M)
		}
		kh := h % j.d.KHeads // ggml's broadcast of the K heads over the V heads
		for t := r.row0; t < r.row0+r.n; t++ {
			qt := j.q.row(t)[kh*D : (kh+1)*D]
			kt := j.k.row(t)[kh*D : (kh+1)*D]
			vt := j.v.row(t)[h*D : (h+1)*D]
			decay, beta := expf(j.g.row(t)[h]), j.beta.row(t)[h]
			out := j.dst.row(t)[h*D : (h+1)*D]
			if deltaToken(M, kt, qt, vt, out, decay, beta, scale) {
				continue
			}
			scaleF32(M, decay)
			for c := range D {
				delta[c] = (vt[c] - dotF32(M[c*D:(c+1)*D], kt)) * beta
			}
			for c := range D {
				madF32(M[c*D:(c+1)*D], kt, delta[c])
			}
			for c := range D {
				out[c] = dotF32(M[c*D:(c+1)*D], qt) * scale
			}
		}
	}
}

// dotF32Go is ggml_vec_dot_f32 as its AVX-512 build sums: four
// accumulators of 16 lanes take element i + 16a + l of each 64-element step
// by FMA, are added pairwise (0+2, 1+3, then the two) and reduced as
// _mm512_reduce_add_ps; the elements past the last full step follow one by
// one, each an FMA into the sum.
func dotF32Go(x, y []float32) float32 {
	n := len(x)
	y = y[:n]
	steps := n &^ 63
	var sum float32
	if steps > 0 {
		var acc [4][16]float32
		for i := 0; i < steps; i += 64 {
			for a := range acc {
				xa, ya := x[i+16*a:i+16*a+16], y[i+16*a:i+16*a+16]
				for l := range acc[a] {
					acc[a][l] = quant.FMA32(xa[l], ya[l], acc[a][l])
				}
			}
		}
		for l := range acc[0] {
			acc[0][l] += acc[2][l]
			acc[1][l] += acc[3][l]
		}
		for l := range acc[0] {
			acc[0][l] += acc[1][l]
		}
		sum = quantReduce16(&acc[0])
	}
	return dotTail(sum, x, y, steps)
}

// dotTail adds x[i]·y[i] for i ≥ from to sum, one FMA each.
func dotTail(sum float32, x, y []float32, from int) float32 {
	for i := from; i < len(x); i++ {
		sum = quant.FMA32(x[i], y[i], sum)
	}
	return sum
}

func quantReduce16(l *[16]float32) float32 { return quant.Reduce16(l) }

// madF32Go sets y[i] = fma(x[i], v, y[i]).
func madF32Go(y, x []float32, v float32) {
	x = x[:len(y)]
	for i, xi := range x {
		y[i] = quant.FMA32(xi, v, y[i])
	}
}
