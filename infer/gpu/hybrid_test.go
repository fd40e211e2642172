package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// Each hybrid op against a float64 reference of its definition in
// infer/recurrent.go. The GPU computes in f32, so agreement is to f32
// rounding of the op's longest sum.

func (b *Backend) f32Weight(t *testing.T, name string, shape []int64, vals []float32) infer.Weight {
	t.Helper()
	w, err := b.LoadWeight(infer.WeightData{Name: name, Type: gguf.F32, Shape: shape, Data: floatsToBytes(vals)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// matrixWeight loads an m×k weight of type typ quantized from vals (row
// major, m rows of k).
func (b *Backend) matrixWeight(t *testing.T, name string, typ gguf.Type, k, m int, vals []float32) infer.Weight {
	t.Helper()
	w, err := b.LoadWeight(infer.WeightData{Name: name, Type: typ, Shape: []int64{int64(k), int64(m)},
		Data: quantizeMatrix(t, typ, m, k, vals)})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// run encodes ops in one pass of n tokens at pos and reads the tensors back.
func (b *Backend) run(t *testing.T, n, pos int, ops func(), reads ...*tensor) [][]float32 {
	t.Helper()
	b.Begin(batchOf(n, pos))
	ops()
	out := make([][]float32, len(reads))
	for i, r := range reads {
		out[i] = make([]float32, min(n, r.rows)*r.cols)
		b.Read(r, out[i])
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var maxAbs, maxDiff float64
	worst := 0
	for i := range want {
		maxAbs = math.Max(maxAbs, math.Abs(want[i]))
		if d := math.Abs(float64(got[i]) - want[i]); d > maxDiff || math.IsNaN(d) {
			maxDiff, worst = d, i
		}
	}
	if maxDiff > tol*math.Max(maxAbs, 1e-30) || math.IsNaN(maxDiff) {
		t.Errorf("%s: max error %.3g at %d (got %v, want %v; largest %.3g, tolerance %g relative)",
			what, maxDiff, worst, got[worst], want[worst], maxAbs, tol)
	}
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func softplus64(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func act64(f infer.Act, x float64) float64 {
	switch f {
	case infer.ActSigmoid:
		return sigmoid64(x)
	case infer.ActSiLU:
		return x * sigmoid64(x)
	}
	return softplus64(x)
}

func TestCopyCols(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(11, 12))
	const n, scols, dcols = 3, 40, 24
	src, dst := b.mustTensor(t, "src", 4, scols), b.mustTensor(t, "dst", 4, dcols)
	sv := randFloats(r, 4*scols, 1)
	b.write(t, src, sv)
	b.write(t, dst, make([]float32, 4*dcols))
	// q|gate interleaved per head: 3 heads of 6 (stride 12) into columns 4…21
	c := infer.Cols{Dst: 4, Src: 2, Width: 6, Stride: 12, Count: 3}
	got := b.run(t, n, 0, func() { b.CopyCols(dst, src, c) }, dst)[0]
	want := make([]float64, n*dcols)
	for i := 0; i < n; i++ {
		for h := 0; h < c.Count; h++ {
			for j := 0; j < c.Width; j++ {
				want[i*dcols+c.Dst+h*c.Width+j] = float64(sv[i*scols+c.Src+h*c.Stride+j])
			}
		}
	}
	checkClose(t, "CopyCols", got, want, 0)
	b.Begin(batchOf(1, 0))
	b.CopyCols(dst, src, infer.Cols{Dst: 0, Src: 36, Width: 6, Stride: 12, Count: 1})
	if err := b.Commit(); err == nil {
		t.Error("CopyCols past the end of src: no error")
	}
}

func TestActivationsAndGates(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(13, 14))
	const n, cols = 3, 300
	x, g, dst := b.mustTensor(t, "x", n, cols), b.mustTensor(t, "g", n, cols), b.mustTensor(t, "dst", n, cols)
	xv, gv := randFloats(r, n*cols, 4), randFloats(r, n*cols, 4)
	xv[5], xv[6] = 25, -30 // softplus's linear branch; exp underflow
	for _, f := range []infer.Act{infer.ActSigmoid, infer.ActSiLU, infer.ActSoftplus} {
		for _, alias := range []string{"none", "dst=x", "dst=g"} {
			t.Run(fmt.Sprintf("%s/%s", f, alias), func(t *testing.T) {
				b.write(t, x, xv)
				b.write(t, g, gv)
				out, gateOut := dst, dst
				if alias == "dst=x" {
					out, gateOut = x, x
				}
				if alias == "dst=g" {
					gateOut = g
				}
				unary := b.run(t, n, 0, func() { b.Unary(out, x, f) }, out)[0]
				want := make([]float64, n*cols)
				for i := range want {
					want[i] = act64(f, float64(xv[i]))
				}
				if alias != "dst=g" {
					checkClose(t, "Unary", unary, want, 2e-6)
				}
				b.write(t, x, xv)
				gated := b.run(t, n, 0, func() { b.Gate(gateOut, x, g, f) }, gateOut)[0]
				for i := range want {
					want[i] = float64(xv[i]) * act64(f, float64(gv[i]))
				}
				checkClose(t, "Gate", gated, want, 2e-6)
			})
		}
	}
	t.Run("DecayGate", func(t *testing.T) {
		const heads = 48
		alpha, out := b.mustTensor(t, "alpha", n, heads), b.mustTensor(t, "decay", n, heads)
		av, biasv, aLog := randFloats(r, n*heads, 3), randFloats(r, heads, 1), randFloats(r, heads, 1)
		ssmA := make([]float32, heads)
		for i, v := range aLog {
			ssmA[i] = -float32(math.Exp(float64(v)))
		}
		bias := b.f32Weight(t, "dt_bias", []int64{heads}, biasv)
		a := b.f32Weight(t, "ssm_a", []int64{heads}, ssmA)
		want := make([]float64, n*heads)
		for i := range want {
			want[i] = softplus64(float64(av[i])+float64(biasv[i%heads])) * float64(ssmA[i%heads])
		}
		for _, inplace := range []bool{false, true} {
			b.write(t, alpha, av)
			dst := out
			if inplace {
				dst = alpha
			}
			got := b.run(t, n, 0, func() { b.DecayGate(dst, alpha, bias, a) }, dst)[0]
			checkClose(t, fmt.Sprintf("DecayGate in place %v", inplace), got, want, 2e-6)
		}
	})
}

func TestL2Norm(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(15, 16))
	for _, c := range []struct{ cols, group int }{{256, 128}, {96, 32}, {1000, 1000}} {
		const n = 3
		const eps = 1e-6
		x, dst := b.mustTensor(t, "x", n, c.cols), b.mustTensor(t, "dst", n, c.cols)
		xv := randFloats(r, n*c.cols, 2)
		for i := 0; i < c.group; i++ {
			xv[i] *= 1e-4 // a group whose Σx² is near eps
		}
		want := make([]float64, n*c.cols)
		for g0 := 0; g0 < n*c.cols; g0 += c.group {
			var ss float64
			for _, v := range xv[g0 : g0+c.group] {
				ss += float64(v) * float64(v)
			}
			scale := 1 / math.Sqrt(ss/float64(c.group)+eps/float64(c.group)) / math.Sqrt(float64(c.group))
			for i := g0; i < g0+c.group; i++ {
				want[i] = float64(xv[i]) * scale
			}
		}
		for _, inplace := range []bool{false, true} {
			b.write(t, x, xv)
			out := dst
			if inplace {
				out = x
			}
			got := b.run(t, n, 0, func() { b.L2Norm(out, x, c.group, eps) }, out)[0]
			checkClose(t, fmt.Sprintf("L2Norm %d/%d in place %v", c.cols, c.group, inplace), got, want, 2e-6)
		}
	}
}

// convRef is ggml_ssm_conv with the state carried in float64.
type convRef struct {
	width, ch int
	w         []float32 // [c][t]
	state     []float64 // (width−1)×ch, oldest first
}

func (c *convRef) step(x []float32, n, pos int) []float64 {
	if pos == 0 {
		clear(c.state)
	}
	u := append([]float64(nil), c.state...)
	for _, v := range x[:n*c.ch] {
		u = append(u, float64(v))
	}
	out := make([]float64, n*c.ch)
	for i := 0; i < n; i++ {
		for ch := 0; ch < c.ch; ch++ {
			var s float64
			for t := 0; t < c.width; t++ {
				s += float64(c.w[ch*c.width+t]) * u[(i+t)*c.ch+ch]
			}
			out[i*c.ch+ch] = s
		}
	}
	copy(c.state, u[n*c.ch:])
	return out
}

func TestCausalConv(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(17, 18))
	const width, ch, layers = 4, 200, 2
	spec := infer.RecurrentSpec{Layers: layers, Channels: ch, ConvWidth: width, VHeads: 2, HeadDim: 8}
	if err := b.NewRecurrentState(spec); err != nil {
		t.Fatal(err)
	}
	wv := randFloats(r, width*ch, 0.5)
	w := b.f32Weight(t, "conv1d", []int64{width, ch}, wv)
	ref := &convRef{width: width, ch: ch, w: wv, state: make([]float64, (width-1)*ch)}
	x, dst := b.mustTensor(t, "x", 8, ch), b.mustTensor(t, "dst", 8, ch)
	pos := 0
	// a prefill, single tokens (fewer than width−1 inputs per pass), a
	// longer batch, in place, then a new sequence at position 0
	for i, step := range []struct {
		n       int
		inplace bool
	}{{5, false}, {1, false}, {1, true}, {8, false}, {2, true}, {3, false}} {
		if i == 5 {
			pos = 0
		}
		xv := randFloats(r, step.n*ch, 1)
		b.write(t, x, xv)
		out := dst
		if step.inplace {
			out = x
		}
		got := b.run(t, step.n, pos, func() { b.CausalConv(out, x, w, 1) }, out)[0]
		checkClose(t, fmt.Sprintf("step %d (%d rows at %d)", i, step.n, pos), got, ref.step(xv, step.n, pos), 1e-6)
		pos += step.n
	}
	state := make([]float32, spec.Floats())
	if err := b.ReadRecurrentState(state); err != nil {
		t.Fatal(err)
	}
	off := int(spec.LayerFloats()) // layer 1's conv state
	checkClose(t, "conv state", state[off:off+(width-1)*ch], ref.state, 0)
	for i, v := range state[:off] {
		if v != 0 {
			t.Fatalf("layer 0's state[%d] = %v, want 0 (untouched)", i, v)
		}
	}
	// A new state replaces the old one under the cached op: a pass that
	// continues (position > 0) starts from its zeros.
	if err := b.NewRecurrentState(spec); err != nil {
		t.Fatal(err)
	}
	clear(ref.state)
	xv := randFloats(r, 2*ch, 1)
	b.write(t, x, xv)
	got := b.run(t, 2, 7, func() { b.CausalConv(dst, x, w, 1) }, dst)[0]
	checkClose(t, "after NewRecurrentState", got, ref.step(xv, 2, 7), 1e-6)
}

// deltaRef is the gated delta rule of infer.HybridOps.DeltaNet in float64,
// with S[h][i][j] (i over keys, j over values).
type deltaRef struct {
	d infer.DeltaNetSpec
	s [][]float64 // per V head, HeadDim×HeadDim
}

func (r *deltaRef) step(q, k, v, g, beta []float32, n, pos int) []float64 {
	d, hd := r.d, r.d.HeadDim
	if pos == 0 {
		for _, s := range r.s {
			clear(s)
		}
	}
	out := make([]float64, n*d.VHeads*hd)
	for t := 0; t < n; t++ {
		for h := 0; h < d.VHeads; h++ {
			s := r.s[h]
			kh := h % d.KHeads
			kk := k[(t*d.KHeads+kh)*hd:][:hd]
			qq := q[(t*d.KHeads+kh)*hd:][:hd]
			vv := v[(t*d.VHeads+h)*hd:][:hd]
			decay := math.Exp(float64(g[t*d.VHeads+h]))
			bt := float64(beta[t*d.VHeads+h])
			for i := range s {
				s[i] *= decay
			}
			delta := make([]float64, hd)
			for j := 0; j < hd; j++ {
				var sk float64
				for i := 0; i < hd; i++ {
					sk += s[i*hd+j] * float64(kk[i])
				}
				delta[j] = (float64(vv[j]) - sk) * bt
			}
			for i := 0; i < hd; i++ {
				for j := 0; j < hd; j++ {
					s[i*hd+j] += float64(kk[i]) * delta[j]
				}
			}
			for j := 0; j < hd; j++ {
				var o float64
				for i := 0; i < hd; i++ {
					o += s[i*hd+j] * float64(qq[i])
				}
				out[(t*d.VHeads+h)*hd+j] = o / math.Sqrt(float64(hd))
			}
		}
	}
	return out
}

// l2rows normalises each head of each row, as the layer does before DeltaNet.
func l2rows(v []float32, hd int) {
	for h0 := 0; h0 < len(v); h0 += hd {
		var ss float64
		for _, x := range v[h0 : h0+hd] {
			ss += float64(x) * float64(x)
		}
		for i := h0; i < h0+hd; i++ {
			v[i] = float32(float64(v[i]) / math.Sqrt(ss+1e-6))
		}
	}
}

// TestDeltaNet checks both forms against the token-by-token definition:
// sequential (every batch), chunked (every batch of two or more, chunks of
// 16 with a partial last one) and the default split between them.
func TestDeltaNet(t *testing.T) {
	forms := []struct {
		name     string
		chunkMin int
	}{{"sequential", math.MaxInt}, {"chunked", 2}, {"default", DefaultDeltaChunkMin}}
	for _, d := range []infer.DeltaNetSpec{{KHeads: 2, VHeads: 6, HeadDim: 32}, {KHeads: 1, VHeads: 2, HeadDim: 128}, {KHeads: 2, VHeads: 4, HeadDim: 24}} {
		for _, form := range forms {
			t.Run(fmt.Sprintf("%d-%d-%d/%s", d.KHeads, d.VHeads, d.HeadDim, form.name), func(t *testing.T) {
				deltaNetMatchesReference(t, d, form.chunkMin)
			})
		}
	}
}

func deltaNetMatchesReference(t *testing.T, d infer.DeltaNetSpec, chunkMin int) {
	{
		{
			b := newTestBackend(t)
			b.deltaChunkMin = chunkMin
			r := rand.New(rand.NewPCG(19, uint64(d.HeadDim)))
			spec := infer.RecurrentSpec{Layers: 2, Channels: 2*d.KHeads*d.HeadDim + d.VHeads*d.HeadDim, ConvWidth: 4, VHeads: d.VHeads, HeadDim: d.HeadDim}
			if err := b.NewRecurrentState(spec); err != nil {
				t.Fatal(err)
			}
			const maxRows = 40
			kd, vd := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
			q, k, v := b.mustTensor(t, "q", maxRows, kd), b.mustTensor(t, "k", maxRows, kd), b.mustTensor(t, "v", maxRows, vd)
			g, beta, dst := b.mustTensor(t, "g", maxRows, d.VHeads), b.mustTensor(t, "beta", maxRows, d.VHeads), b.mustTensor(t, "o", maxRows, vd)
			ref := &deltaRef{d: d, s: make([][]float64, d.VHeads)}
			for h := range ref.s {
				ref.s[h] = make([]float64, d.HeadDim*d.HeadDim)
			}
			type inputs struct{ q, k, v, g, beta []float32 }
			gen := func(n int) inputs {
				in := inputs{randFloats(r, n*kd, 1), randFloats(r, n*kd, 1), randFloats(r, n*vd, 1), make([]float32, n*d.VHeads), make([]float32, n*d.VHeads)}
				l2rows(in.q, d.HeadDim)
				l2rows(in.k, d.HeadDim)
				for i := range in.g {
					in.g[i] = -float32(softplus64(r.NormFloat64()) * 0.3) // decays in (0, 1)
					in.beta[i] = float32(sigmoid64(r.NormFloat64()))
				}
				return in
			}
			pass := func(in inputs, n, pos int) []float32 {
				for _, p := range []struct {
					t *tensor
					v []float32
				}{{q, in.q}, {k, in.k}, {v, in.v}, {g, in.g}, {beta, in.beta}} {
					b.write(t, p.t, p.v)
				}
				return b.run(t, n, pos, func() { b.DeltaNet(dst, q, k, v, g, beta, 1, d) }, dst)[0]
			}
			pos := 0
			var snapshot, first []float32
			var again inputs
			againPos := 0
			for i, n := range []int{1, maxRows, 1, 7, 1} {
				in := gen(n)
				if i == 3 {
					snapshot = make([]float32, spec.Floats())
					if err := b.ReadRecurrentState(snapshot); err != nil {
						t.Fatal(err)
					}
					again, againPos = in, pos
				}
				want := ref.step(in.q, in.k, in.v, in.g, in.beta, n, pos)
				got := pass(in, n, pos)
				if i == 3 {
					first = got
				}
				checkClose(t, fmt.Sprintf("pass %d (%d rows at %d)", i, n, pos), got, want, 2e-5)
				pos += n
			}
			// the layer's state, transposed as llama.cpp keeps it
			state := make([]float32, spec.Floats())
			if err := b.ReadRecurrentState(state); err != nil {
				t.Fatal(err)
			}
			off := int(spec.LayerFloats()) + (spec.ConvWidth-1)*spec.Channels
			want := make([]float64, vd*d.HeadDim)
			for h, s := range ref.s {
				for i := 0; i < d.HeadDim; i++ {
					for j := 0; j < d.HeadDim; j++ {
						want[(h*d.HeadDim+j)*d.HeadDim+i] = s[i*d.HeadDim+j]
					}
				}
			}
			checkClose(t, "delta state", state[off:off+len(want)], want, 2e-5)
			// restoring the snapshot taken before pass 3 repeats it exactly
			if err := b.WriteRecurrentState(snapshot); err != nil {
				t.Fatal(err)
			}
			second := pass(again, 7, againPos)
			for i := range first {
				if first[i] != second[i] {
					t.Fatalf("after restoring the snapshot: output %d is %v, was %v", i, second[i], first[i])
				}
			}
		}
	}
}

// hadamard64 is H (normalised, natural order) on each block of x.
func hadamard64(x []float64, block int) []float64 {
	out := make([]float64, len(x))
	for b0 := 0; b0 < len(x); b0 += block {
		for i := 0; i < block; i++ {
			var s float64
			for j := 0; j < block; j++ {
				sign := 1.0
				if popcount(i&j)%2 == 1 {
					sign = -1
				}
				s += sign * x[b0+j]
			}
			out[b0+i] = s / math.Sqrt(float64(block))
		}
	}
	return out
}

func popcount(v int) int {
	n := 0
	for ; v != 0; v &= v - 1 {
		n++
	}
	return n
}

func TestHadamard(t *testing.T) {
	t.Run("block of 1024", func(t *testing.T) { hadamardMatches(t, 2, 2048, []int{1024}) })
	hadamardMatches(t, 3, 384, []int{128, 64})
}

// hadamardMatches rotates n rows of cols values in blocks of blocks[0]
// (blocks[1] for the case with signs before) in every variant.
func hadamardMatches(t *testing.T, n, cols int, blocks []int) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(21, uint64(cols)))
	small := blocks[len(blocks)-1]
	signv := make([]float32, cols)
	for i := range signv {
		signv[i] = float32(1 - 2*(r.IntN(2)))
	}
	signs := b.f32Weight(t, "signs", []int64{int64(cols)}, signv)
	x, dst := b.mustTensor(t, "x", n, cols), b.mustTensor(t, "dst", n, cols)
	xv := randFloats(r, n*cols, 1)
	for _, c := range []struct {
		name    string
		block   int
		signs   bool
		after   bool
		regroup infer.HeadOrder
	}{
		{"plain", blocks[0], false, false, infer.HeadOrder{}},
		{"signs", small, true, false, infer.HeadOrder{}},
		{"signs after", blocks[0], true, true, infer.HeadOrder{}},
		{"regroup", blocks[0], true, false, infer.HeadOrder{HeadDim: 16, KHeads: 4}}, // 384: 24 heads, 6 per K head
		{"regroup 2", blocks[0], false, false, infer.HeadOrder{HeadDim: 32, KHeads: 4}},
	} {
		for _, inplace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/inplace=%v", c.name, inplace), func(t *testing.T) {
				rot := infer.Rotation{Block: c.block, SignsAfter: c.after, Regroup: c.regroup}
				if c.signs {
					rot.Signs = signs
				}
				want := make([]float64, 0, n*cols)
				for i := 0; i < n; i++ {
					row := make([]float64, cols)
					for p := range row {
						src := p
						if hd := c.regroup.HeadDim; hd > 0 {
							rep := cols / hd / c.regroup.KHeads
							o := p / hd
							kh, rr := o/rep, o%rep
							src = (rr*c.regroup.KHeads+kh)*hd + p%hd
						}
						row[p] = float64(xv[i*cols+src])
						if c.signs && !c.after {
							row[p] *= float64(signv[p])
						}
					}
					row = hadamard64(row, c.block)
					if c.signs && c.after {
						for p := range row {
							row[p] *= float64(signv[p])
						}
					}
					want = append(want, row...)
				}
				b.write(t, x, xv)
				out := dst
				if inplace {
					out = x
				}
				got := b.run(t, n, 0, func() { b.Hadamard(out, x, rot) }, out)[0]
				checkClose(t, "Hadamard", got, want, 2e-6)
			})
		}
	}
}

// TestHybridChainInOnePass runs a DeltaNet layer's op sequence as decode
// would — Q1_0 projections waiting for fusion, then every hybrid op — in
// one pass and op by op in passes of their own: the pass machinery
// (pending matvecs, lazy ops, flushes before each hybrid op) must not
// change a single bit, over two tokens (the second continues the state).
func TestHybridChainInOnePass(t *testing.T) {
	d := infer.DeltaNetSpec{KHeads: 2, VHeads: 4, HeadDim: 32}
	kd, vd := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
	ch := 2*kd + vd
	const embed, width = 256, 4
	r := rand.New(rand.NewPCG(27, 28))
	wqkv := quantizeMatrix(t, gguf.Q1_0, ch, embed, randFloats(r, ch*embed, 1))
	wz := quantizeMatrix(t, gguf.Q1_0, vd, embed, randFloats(r, vd*embed, 1))
	wab := randFloats(r, 2*d.VHeads*embed, 0.05)
	conv, bias, aLog := randFloats(r, width*ch, 0.5), randFloats(r, d.VHeads, 1), randFloats(r, d.VHeads, 0.5)
	xs := [][]float32{randFloats(r, embed, 1), randFloats(r, embed, 1)}

	layer := func(split bool) [][]float32 {
		b := newTestBackend(t)
		if err := b.NewRecurrentState(infer.RecurrentSpec{Layers: 1, Channels: ch, ConvWidth: width, VHeads: d.VHeads, HeadDim: d.HeadDim}); err != nil {
			t.Fatal(err)
		}
		load := func(name string, typ gguf.Type, k, m int, data []byte) infer.Weight {
			w, err := b.LoadWeight(infer.WeightData{Name: name, Type: typ, Shape: []int64{int64(k), int64(m)}, Data: data})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		Wqkv, Wz := load("qkv", gguf.Q1_0, embed, ch, wqkv), load("z", gguf.Q1_0, embed, vd, wz)
		Wab := load("ab", gguf.F32, embed, 2*d.VHeads, floatsToBytes(wab))
		convW := b.f32Weight(t, "conv", []int64{width, int64(ch)}, conv)
		ssmA := make([]float32, d.VHeads)
		for i, v := range aLog {
			ssmA[i] = -float32(math.Exp(float64(v)))
		}
		biasW, aW := b.f32Weight(t, "bias", []int64{int64(d.VHeads)}, bias), b.f32Weight(t, "a", []int64{int64(d.VHeads)}, ssmA)
		x, qkv, z, ab := b.mustTensor(t, "x", 1, embed), b.mustTensor(t, "qkv", 1, ch), b.mustTensor(t, "z", 1, vd), b.mustTensor(t, "ab", 1, 2*d.VHeads)
		cv, q, k, v := b.mustTensor(t, "conv", 1, ch), b.mustTensor(t, "q", 1, kd), b.mustTensor(t, "k", 1, kd), b.mustTensor(t, "v", 1, vd)
		alpha, beta, o := b.mustTensor(t, "alpha", 1, d.VHeads), b.mustTensor(t, "beta", 1, d.VHeads), b.mustTensor(t, "o", 1, vd)
		ops := []func(){
			func() { b.MatMul(qkv, Wqkv, x) },
			func() { b.MatMul(z, Wz, x) },
			func() { b.MatMul(ab, Wab, x) },
			func() { b.CausalConv(cv, qkv, convW, 0) },
			func() { b.Unary(cv, cv, infer.ActSiLU) },
			func() { b.CopyCols(q, cv, infer.Cols{Width: kd, Count: 1}) },
			func() { b.CopyCols(k, cv, infer.Cols{Src: kd, Width: kd, Count: 1}) },
			func() { b.CopyCols(v, cv, infer.Cols{Src: 2 * kd, Width: vd, Count: 1}) },
			func() { b.L2Norm(q, q, d.HeadDim, 1e-6) },
			func() { b.L2Norm(k, k, d.HeadDim, 1e-6) },
			func() { b.CopyCols(alpha, ab, infer.Cols{Width: d.VHeads, Count: 1}) },
			func() { b.CopyCols(beta, ab, infer.Cols{Src: d.VHeads, Width: d.VHeads, Count: 1}) },
			func() { b.Unary(beta, beta, infer.ActSigmoid) },
			func() { b.DecayGate(alpha, alpha, biasW, aW) },
			func() { b.DeltaNet(o, q, k, v, alpha, beta, 0, d) },
			func() { b.Gate(o, o, z, infer.ActSiLU) },
			func() { b.Hadamard(o, o, infer.Rotation{Block: 64}) },
		}
		var outs [][]float32
		for pos, xv := range xs {
			b.write(t, x, xv)
			if split {
				for _, op := range ops {
					b.run(t, 1, pos, op)
				}
				outs = append(outs, b.run(t, 1, pos, func() {}, o)[0])
				continue
			}
			outs = append(outs, b.run(t, 1, pos, func() {
				for _, op := range ops {
					op()
				}
			}, o)[0])
		}
		return outs
	}
	want, got := layer(true), layer(false)
	for step := range want {
		var norm float64
		for _, v := range want[step] {
			norm += float64(v) * float64(v)
		}
		if norm == 0 || math.IsNaN(norm) {
			t.Fatalf("token %d: the layer's output has norm %v", step, norm)
		}
		for i := range want[step] {
			if got[step][i] != want[step][i] {
				t.Fatalf("token %d: output %d is %v in one pass, %v op by op", step, i, got[step][i], want[step][i])
			}
		}
	}
}

// The fused input stage of a decoding step's DeltaNet layer gives the op
// sequence's values bit for bit, and moves the conv state on alike, over
// steps from position 0 (zero state) and past it; a two-row pass and Fuse
// "off" decline, so that the caller encodes the sequence.
func TestFuseDeltaNetInputsIsTheOps(t *testing.T) {
	type shape struct {
		d    infer.DeltaNetSpec
		proj bool      // the gates' projections in the fused op
		gate gguf.Type // their weights' type
	}
	for _, sh := range []shape{{infer.DeltaNetSpec{KHeads: 2, VHeads: 4, HeadDim: 128}, false, 0}, {infer.DeltaNetSpec{KHeads: 1, VHeads: 3, HeadDim: 96}, false, 0},
		{infer.DeltaNetSpec{KHeads: 2, VHeads: 2, HeadDim: 32}, false, 0}, {infer.DeltaNetSpec{KHeads: 2, VHeads: 4, HeadDim: 128}, true, gguf.BF16},
		{infer.DeltaNetSpec{KHeads: 1, VHeads: 3, HeadDim: 64}, true, gguf.F16}, {infer.DeltaNetSpec{KHeads: 2, VHeads: 6, HeadDim: 128}, true, gguf.F32}} {
		d := sh.d
		t.Run(fmt.Sprintf("%dx%dx%d%s", d.KHeads, d.VHeads, d.HeadDim, map[bool]string{true: "/" + sh.gate.String()}[sh.proj]), func(t *testing.T) {
			kd, vd := d.KHeads*d.HeadDim, d.VHeads*d.HeadDim
			ch := 2*kd + vd
			const width, steps = 4, 4
			spec := infer.RecurrentSpec{Layers: 2, Channels: ch, ConvWidth: width, VHeads: d.VHeads, HeadDim: d.HeadDim}
			r := rand.New(rand.NewPCG(41, uint64(ch)))
			conv, bias, ssmA := randFloats(r, width*ch, 0.5), randFloats(r, d.VHeads, 1), randFloats(r, d.VHeads, 0.5)
			var xs, bs, as, hs [steps][]float32
			const hidden = 264 // the gates' input width: 66 vec4s, not a multiple of the 64 threads
			for i := range steps {
				xs[i], bs[i], as[i], hs[i] = randFloats(r, ch, 2), randFloats(r, d.VHeads, 3), randFloats(r, d.VHeads, 3), randFloats(r, hidden, 1)
			}
			wbv, wav := randFloats(r, d.VHeads*hidden, 0.2), randFloats(r, d.VHeads*hidden, 0.2)
			type result struct{ q, k, v, beta, alpha, state []float32 }
			layer := func(fused bool) []result {
				b := newTestBackend(t)
				if err := b.NewRecurrentState(spec); err != nil {
					t.Fatal(err)
				}
				convW := b.f32Weight(t, "conv", []int64{width, int64(ch)}, conv)
				biasW, aW := b.f32Weight(t, "bias", []int64{int64(d.VHeads)}, bias), b.f32Weight(t, "a", []int64{int64(d.VHeads)}, ssmA)
				x, cv := b.mustTensor(t, "qkv", 2, ch), b.mustTensor(t, "conv", 2, ch)
				q, k, v := b.mustTensor(t, "q", 2, kd), b.mustTensor(t, "k", 2, kd), b.mustTensor(t, "v", 2, vd)
				beta, alpha := b.mustTensor(t, "beta", 2, d.VHeads), b.mustTensor(t, "alpha", 2, d.VHeads)
				in := infer.DeltaNetInputs{Q: q, K: k, V: v, QKV: x, Beta: beta, Alpha: alpha, Conv: convW, DTBias: biasW, SSMA: aW,
					Layer: 1, Spec: d, Eps: 1e-6}
				h := b.mustTensor(t, "h", 2, hidden)
				if sh.proj {
					in.X, in.WBeta, in.WAlpha = h, b.matrixWeight(t, "ssm_beta", sh.gate, hidden, d.VHeads, wbv),
						b.matrixWeight(t, "ssm_alpha", sh.gate, hidden, d.VHeads, wav)
				}
				var out []result
				for pos := range steps {
					b.write(t, x, xs[pos])
					b.write(t, beta, bs[pos])
					b.write(t, alpha, as[pos])
					b.write(t, h, hs[pos])
					got := b.run(t, 1, pos, func() {
						if fused {
							if !b.FuseDeltaNetInputs(in) {
								t.Fatal("a one-row pass was not fused")
							}
							return
						}
						if in.X != nil {
							b.MatMul(beta, in.WBeta, h)
							b.MatMul(alpha, in.WAlpha, h)
						}
						b.Unary(beta, beta, infer.ActSigmoid)
						b.DecayGate(alpha, alpha, biasW, aW)
						b.CausalConv(cv, x, convW, 1)
						b.Unary(cv, cv, infer.ActSiLU)
						b.CopyCols(q, cv, infer.Cols{Width: kd, Count: 1})
						b.CopyCols(k, cv, infer.Cols{Src: kd, Width: kd, Count: 1})
						b.CopyCols(v, cv, infer.Cols{Src: 2 * kd, Width: vd, Count: 1})
						b.L2Norm(q, q, d.HeadDim, 1e-6)
						b.L2Norm(k, k, d.HeadDim, 1e-6)
					}, q, k, v, beta, alpha)
					state := make([]float32, spec.Floats())
					if err := b.ReadRecurrentState(state); err != nil {
						t.Fatal(err)
					}
					out = append(out, result{got[0], got[1], got[2], got[3], got[4], state})
				}
				if fused {
					b.run(t, 2, steps, func() {
						if b.FuseDeltaNetInputs(in) {
							t.Error("a two-row pass was fused")
						}
					})
				}
				return out
			}
			want, got := layer(false), layer(true)
			for pos := range steps {
				w, g := want[pos], got[pos]
				for _, c := range []struct {
					name      string
					want, got []float32
				}{{"state", w.state, g.state}, {"v", w.v, g.v}, {"beta", w.beta, g.beta}, {"alpha", w.alpha, g.alpha}, {"q", w.q, g.q}, {"k", w.k, g.k}} {
					for i := range c.want {
						if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
							t.Fatalf("step %d: %s[%d] fused %v, ops %v", pos, c.name, i, c.got[i], c.want[i])
						}
					}
				}
			}
			off := newUnfusedTestBackend(t)
			if err := off.NewRecurrentState(spec); err != nil {
				t.Fatal(err)
			}
			off.run(t, 1, 0, func() {
				if off.FuseDeltaNetInputs(infer.DeltaNetInputs{}) {
					t.Error("the unfused backend fused")
				}
			})
		})
	}
}

// Two matmuls of one activation row by weights that round it alike (F16:
// x to f16) share one rounding dispatch, with the products of separate
// passes; a write to x between them rounds it again.
func TestMatMulsShareARounding(t *testing.T) {
	const k, m = 256, 48
	r := rand.New(rand.NewPCG(51, 52))
	b := newTestBackend(t)
	wa, wb := b.matrixWeight(t, "beta", gguf.F16, k, m, randFloats(r, m*k, 0.1)), b.matrixWeight(t, "alpha", gguf.F16, k, m, randFloats(r, m*k, 0.1))
	x, ya, yb := b.mustTensor(t, "x", 1, k), b.mustTensor(t, "ya", 1, m), b.mustTensor(t, "yb", 1, m)
	xv := randFloats(r, k, 1)
	b.write(t, x, xv)
	alone := [][]float32{b.run(t, 1, 0, func() { b.MatMul(ya, wa, x) }, ya)[0], b.run(t, 1, 0, func() { b.MatMul(yb, wb, x) }, yb)[0]}
	single := b.dispatches
	both := b.run(t, 1, 0, func() { b.MatMul(ya, wa, x); b.MatMul(yb, wb, x) }, ya, yb)
	if b.dispatches != 2*single-1 {
		t.Errorf("two matmuls of one x: %d dispatches, one alone %d", b.dispatches, single)
	}
	for i := range alone {
		for j := range alone[i] {
			if both[i][j] != alone[i][j] {
				t.Fatalf("product %d, row %d: %v together, %v alone", i, j, both[i][j], alone[i][j])
			}
		}
	}
	// x rewritten between the matmuls (a Unary on it): rounded again
	b.run(t, 1, 0, func() { b.MatMul(ya, wa, x); b.Unary(x, x, infer.ActSiLU); b.MatMul(yb, wb, x) })
	if b.dispatches != 2*single+1 {
		t.Errorf("x rewritten between two matmuls: %d dispatches, want %d", b.dispatches, 2*single+1)
	}
}

// The gated DeltaNet's output o ⊙ silu(z) after o's per-head norm, in one
// act_q8 dispatch (normGLU), is the two ops bit for bit: the normed o, the
// gated row and its rounding (read by the Q1_0 matvec after it), for
// heads of 32 to 256 values, a row ending inside a workgroup (12 heads of
// 32) included.
func TestHeadNormGLUIsTheOps(t *testing.T) {
	for _, sh := range []struct{ head, heads int }{{32, 12}, {64, 8}, {128, 6}, {256, 3}} {
		t.Run(fmt.Sprintf("%dx%d", sh.heads, sh.head), func(t *testing.T) {
			g := sh.head * sh.heads
			const m = 64
			r := rand.New(rand.NewPCG(61, uint64(g)))
			ov, zv, nv := randFloats(r, g, 2), randFloats(r, g, 1.5), randFloats(r, sh.head, 1)
			wv := randFloats(r, m*g, 0.3)
			b := newTestBackend(t)
			w := b.f32Weight(t, "ssm_norm", []int64{int64(sh.head)}, nv)
			wout := b.matrixWeight(t, "ssm_out", gguf.Q1_0, g, m, wv)
			o, z, d := b.mustTensor(t, "o", 1, g), b.mustTensor(t, "z", 1, g), b.mustTensor(t, "d", 1, m)
			pass := func(fused bool) ([][]float32, int) {
				b.write(t, o, ov)
				b.write(t, z, zv)
				got := b.run(t, 1, 3, func() {
					b.RMSNorm(o, o, w, 1e-6)
					if !fused {
						b.touch(o)
					}
					b.SwiGLU(z, z, o)
					b.MatMul(d, wout, z)
				}, o, z, d)
				return got, b.dispatches
			}
			want, ops := pass(false)
			got, fusedOps := pass(true)
			if fusedOps != ops-1 {
				t.Errorf("%d dispatches fused, %d as the ops", fusedOps, ops)
			}
			for i, name := range []string{"o", "z", "d"} {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s[%d]: %v fused, %v as the ops", name, j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}

// A decode row's sigmoid gate (qwen35's attention output) writes its Q8_0
// rounding in one act_q8 dispatch, read by the q1_xq matvec after it: the
// gated row is unary.wgsl's bit for bit, and the product is the unfused
// pass's (which rounds in its matvec) within the summation order.
func TestSigmoidGateRounds(t *testing.T) {
	const g, m = 384, 64 // the row ends inside act_q8's second workgroup
	r := rand.New(rand.NewPCG(71, 72))
	av, gv, wv := randFloats(r, g, 2), randFloats(r, g, 3), randFloats(r, m*g, 0.3)
	pass := func(unfused bool) ([][]float32, map[string]int) {
		b := newTestBackend(t)
		b.noFuse = unfused
		w := b.matrixWeight(t, "attn_output", gguf.Q1_0, g, m, wv)
		att, gate, d := b.mustTensor(t, "attn", 1, g), b.mustTensor(t, "gate", 1, g), b.mustTensor(t, "d", 1, m)
		b.write(t, att, av)
		b.write(t, gate, gv)
		got := b.run(t, 1, 5, func() {
			b.Gate(att, att, gate, infer.ActSigmoid)
			b.MatMul(d, w, att)
		}, att, d)
		return got, b.LastCensus()
	}
	want, _ := pass(true)
	got, census := pass(false)
	if census["act_q8"] != 1 || census["q1_xq"] != 1 || census["unary"] != 0 {
		t.Errorf("census %v: want act_q8 and q1_xq once, no unary", census)
	}
	for j := range want[0] {
		if math.Float32bits(got[0][j]) != math.Float32bits(want[0][j]) {
			t.Fatalf("gated[%d]: %v rounded by act_q8, %v by unary", j, got[0][j], want[0][j])
		}
	}
	ref := make([]float64, m)
	for i := range ref {
		ref[i] = float64(want[1][i])
	}
	checkClose(t, "product", got[1], ref, 1e-5)
}
