package cpu

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// The recurrent ops against float64 references written from the equations
// (infer/recurrent.go), sharing no code with the kernels.

func newTestBackend(t *testing.T, threads int) *Backend {
	t.Helper()
	b, err := New(infer.BackendOptions{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func randTensor(t *testing.T, b *Backend, rng *rand.Rand, name string, rows, cols int, scale float64) *tensor {
	t.Helper()
	x, err := b.NewTensor(name, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	ct := x.(*tensor)
	for i := range ct.data {
		ct.data[i] = float32(scale * rng.NormFloat64())
	}
	return ct
}

func f32Weight(t *testing.T, b *Backend, name string, v []float32, shape ...int64) infer.Weight {
	t.Helper()
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	w, err := b.LoadWeight(infer.WeightData{Name: name, Type: gguf.F32, Shape: shape, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// closeTo checks got against a float64 reference within rel·(|want|+floor).
func closeTo(t *testing.T, what string, got []float32, want []float64, rel, floor float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= rel*(math.Abs(want[i])+floor)) {
			t.Fatalf("%s[%d] = %v, want %v (diff %.3g)", what, i, got[i], want[i], d)
		}
	}
}

func pass(t *testing.T, b *Backend, n, pos int, ops func()) {
	t.Helper()
	b.Begin(infer.Batch{Tokens: make([]int32, n), Pos: pos})
	ops()
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestDotF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 63, 64, 65, 128, 200, 256} {
		x, y := make([]float32, n), make([]float32, n)
		var want float64
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			want += float64(x[i]) * float64(y[i])
		}
		closeTo(t, "dot", []float32{dotF32(x, y)}, []float64{want}, 1e-5, float64(n))
	}
}

// TestDotF32SIMD: the AVX-512 loops give the portable loops' bits.
func TestDotF32SIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, n := range []int{16, 64, 100, 128, 256} {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		if got, want := dotF32(x, y), dotF32Go(x, y); got != want {
			t.Errorf("n=%d: dot %v, portable %v", n, got, want)
		}
		a, b := append([]float32(nil), y...), append([]float32(nil), y...)
		madF32(a, x, 0.37)
		madF32Go(b, x, 0.37)
		scaleF32(a, 0.93)
		for i := range b {
			b[i] *= 0.93
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("n=%d: mad/scale [%d] = %v, portable %v", n, i, a[i], b[i])
			}
		}
	}
}

func TestCopyCols(t *testing.T) {
	b := newTestBackend(t, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	src := randTensor(t, b, rng, "src", 3, 24, 1)
	dst := randTensor(t, b, rng, "dst", 3, 10, 1)
	// Two heads of 4 at stride 8 from column 2, into column 1.
	c := infer.Cols{Dst: 1, Src: 2, Width: 4, Stride: 8, Count: 2}
	before := append([]float32(nil), dst.data...)
	pass(t, b, 2, 0, func() { b.CopyCols(dst, src, c) })
	for r := range 3 {
		for j := range 10 {
			want := before[r*10+j]
			if h, o := (j-1)/4, (j-1)%4; r < 2 && j >= 1 && h < 2 {
				want = src.data[r*24+2+h*8+o]
			}
			if got := dst.data[r*10+j]; got != want {
				t.Fatalf("dst[%d][%d] = %v, want %v", r, j, got, want)
			}
		}
	}
	b.Begin(infer.Batch{Tokens: make([]int32, 2)})
	b.CopyCols(dst, src, infer.Cols{Dst: 0, Src: 20, Width: 4, Stride: 8, Count: 2})
	if err := b.Commit(); !errors.Is(err, infer.ErrBadShape) {
		t.Fatalf("CopyCols past the source's columns: %v, want ErrBadShape", err)
	}
}

func TestActivations(t *testing.T) {
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	ref := map[infer.Act]func(float64) float64{
		infer.ActSigmoid: sig,
		infer.ActSiLU:    func(x float64) float64 { return x * sig(x) },
		infer.ActSoftplus: func(x float64) float64 {
			if x > 20 {
				return x
			}
			return math.Log1p(math.Exp(x))
		},
	}
	b := newTestBackend(t, 1)
	rng := rand.New(rand.NewPCG(5, 6))
	for f, fn := range ref {
		// 37 columns: two SIMD blocks of 16 and a tail.
		x := randTensor(t, b, rng, "x", 2, 37, 6)
		g := randTensor(t, b, rng, "g", 2, 37, 6)
		u := randTensor(t, b, rng, "u", 2, 37, 1)
		d := randTensor(t, b, rng, "d", 2, 37, 1)
		pass(t, b, 2, 0, func() {
			b.Unary(u, x, f)
			b.Gate(d, x, g, f)
		})
		wantU, wantD := make([]float64, len(x.data)), make([]float64, len(x.data))
		for i, v := range x.data {
			wantU[i] = fn(float64(v))
			wantD[i] = float64(v) * fn(float64(g.data[i]))
		}
		// softplus's 1 + expf(x) rounds at 1: its error is absolute.
		floor := 1e-30
		if f == infer.ActSoftplus {
			floor = 1
		}
		closeTo(t, f.String(), u.data, wantU, 1e-6, floor)
		closeTo(t, "gate "+f.String(), d.data, wantD, 1e-6, floor)
	}
}

func TestDecayGate(t *testing.T) {
	b := newTestBackend(t, 1)
	rng := rand.New(rand.NewPCG(7, 8))
	const heads = 6
	bias, a := make([]float32, heads), make([]float32, heads)
	for i := range bias {
		bias[i] = float32(-3 + rng.NormFloat64())
		a[i] = float32(-math.Exp(rng.NormFloat64()))
	}
	bias[0] = 25 // softplus's linear branch
	wb, wa := f32Weight(t, b, "dt_bias", bias, heads), f32Weight(t, b, "ssm_a", a, heads)
	alpha := randTensor(t, b, rng, "alpha", 3, heads, 2)
	d := randTensor(t, b, rng, "g", 3, heads, 1)
	pass(t, b, 3, 0, func() { b.DecayGate(d, alpha, wb, wa) })
	want := make([]float64, len(alpha.data))
	for i, v := range alpha.data {
		z := float64(v) + float64(bias[i%heads])
		sp := math.Log1p(math.Exp(z))
		if z > 20 {
			sp = z
		}
		want[i] = sp * float64(a[i%heads])
	}
	closeTo(t, "decay", d.data, want, 1e-6, 1) // softplus's absolute error
}

func TestL2Norm(t *testing.T) {
	b := newTestBackend(t, 1)
	rng := rand.New(rand.NewPCG(9, 10))
	const group, eps = 16, 1e-6
	x := randTensor(t, b, rng, "x", 2, 3*group, 1)
	x.data[0] = 0 // a zero-ish head must not blow up
	d := randTensor(t, b, rng, "d", 2, 3*group, 1)
	pass(t, b, 2, 0, func() { b.L2Norm(d, x, group, eps) })
	want := make([]float64, len(x.data))
	for s := 0; s < len(x.data); s += group {
		var sum float64
		for _, v := range x.data[s : s+group] {
			sum += float64(v) * float64(v)
		}
		for i := s; i < s+group; i++ {
			want[i] = float64(x.data[i]) / math.Sqrt(sum+eps)
		}
	}
	closeTo(t, "l2", d.data, want, 1e-6, 1e-3)
}

// recurrentLayers is the state the tests allocate: two layers, so that
// layer 1's state must not be touched by layer 0's ops.
func recurrentSpec(channels, width, vheads, dim int) infer.RecurrentSpec {
	return infer.RecurrentSpec{Layers: 2, Channels: channels, ConvWidth: width, VHeads: vheads, HeadDim: dim}
}

func TestCausalConv(t *testing.T) {
	const channels, width = 40, 4
	b := newTestBackend(t, 2)
	if err := b.NewRecurrentState(recurrentSpec(channels, width, 1, 1)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	kernel := make([]float32, channels*width)
	for i := range kernel {
		kernel[i] = float32(rng.NormFloat64())
	}
	w := f32Weight(t, b, "conv1d", kernel, width, channels)
	// 9 tokens in passes of 2, 1, 4 and 2: a pass shorter than the window
	// carries state through.
	const total = 9
	seq := randTensor(t, b, rng, "seq", total, channels, 1)
	x := randTensor(t, b, rng, "x", 4, channels, 1)
	y := randTensor(t, b, rng, "y", 4, channels, 1)
	var got []float32
	pos := 0
	for _, n := range []int{2, 1, 4, 2} {
		copy(x.data, seq.data[pos*channels:(pos+n)*channels])
		pass(t, b, n, pos, func() { b.CausalConv(y, x, w, 1) })
		got = append(got, y.data[:n*channels]...)
		pos += n
	}
	want := make([]float64, total*channels)
	for i := range total {
		for c := range channels {
			for k := range width {
				if src := i - (width - 1) + k; src >= 0 {
					want[i*channels+c] += float64(kernel[c*width+k]) * float64(seq.data[src*channels+c])
				}
			}
		}
	}
	closeTo(t, "conv", got, want, 1e-5, 1)
	for _, v := range b.rs.conv[0] {
		if v != 0 {
			t.Fatal("layer 1's convolution wrote layer 0's state")
		}
	}
	// A pass at position 0 forgets the past.
	copy(x.data, seq.data[:2*channels])
	pass(t, b, 2, 0, func() { b.CausalConv(y, x, w, 1) })
	closeTo(t, "conv after restart", y.data[:2*channels], want[:2*channels], 1e-5, 1)
}

// deltaRef is the gated delta rule in float64 with S untransposed:
// S = exp(g)·S; S += k (β(v − Sᵀk))ᵀ; o = Sᵀq/√d, K head h mod KHeads.
type deltaRef struct {
	d infer.DeltaNetSpec
	S [][]float64 // per V head, d×d row-major S[i][j]
}

func (r *deltaRef) step(q, k, v, g, beta []float32) []float64 {
	D := r.d.HeadDim
	out := make([]float64, r.d.VHeads*D)
	for h := range r.d.VHeads {
		S := r.S[h]
		kh := h % r.d.KHeads
		qh, kk, vh := q[kh*D:(kh+1)*D], k[kh*D:(kh+1)*D], v[h*D:(h+1)*D]
		decay := math.Exp(float64(g[h]))
		for i := range S {
			S[i] *= decay
		}
		delta := make([]float64, D)
		for j := range D {
			var sk float64
			for i := range D {
				sk += S[i*D+j] * float64(kk[i])
			}
			delta[j] = (float64(vh[j]) - sk) * float64(beta[h])
		}
		for i := range D {
			for j := range D {
				S[i*D+j] += float64(kk[i]) * delta[j]
			}
		}
		for j := range D {
			var o float64
			for i := range D {
				o += S[i*D+j] * float64(qh[i])
			}
			out[h*D+j] = o / math.Sqrt(float64(D))
		}
	}
	return out
}

func TestDeltaNet(t *testing.T) {
	for _, D := range []int{32, 64, 128} {
		spec := infer.DeltaNetSpec{KHeads: 2, VHeads: 6, HeadDim: D}
		b := newTestBackend(t, 2)
		if err := b.NewRecurrentState(recurrentSpec(8, 2, spec.VHeads, D)); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(13, uint64(D)))
		const rows = 5
		normalize := func(x *tensor) {
			for s := 0; s < len(x.data); s += D {
				var n float64
				for _, v := range x.data[s : s+D] {
					n += float64(v) * float64(v)
				}
				for i := s; i < s+D; i++ {
					x.data[i] /= float32(math.Sqrt(n))
				}
			}
		}
		q := randTensor(t, b, rng, "q", rows, spec.KHeads*D, 1)
		k := randTensor(t, b, rng, "k", rows, spec.KHeads*D, 1)
		v := randTensor(t, b, rng, "v", rows, spec.VHeads*D, 1)
		g := randTensor(t, b, rng, "g", rows, spec.VHeads, 0.1)
		beta := randTensor(t, b, rng, "beta", rows, spec.VHeads, 1)
		for i := range g.data {
			g.data[i] = -float32(math.Abs(float64(g.data[i])))
			beta.data[i] = 1 / (1 + float32(math.Exp(float64(-beta.data[i]))))
		}
		normalize(q)
		normalize(k)
		out := randTensor(t, b, rng, "out", rows, spec.VHeads*D, 1)

		ref := &deltaRef{d: spec, S: make([][]float64, spec.VHeads)}
		for h := range ref.S {
			ref.S[h] = make([]float64, D*D)
		}
		var want []float64
		for i := range rows {
			want = append(want, ref.step(q.row(i), k.row(i), v.row(i), g.row(i), beta.row(i))...)
		}

		// One pass of five tokens.
		pass(t, b, rows, 0, func() { b.DeltaNet(out, q, k, v, g, beta, 1, spec) })
		closeTo(t, "deltanet batch", out.data, want, 1e-4, 0.05)
		batch := append([]float32(nil), out.data...)

		// The same tokens one pass each, from a fresh start at position 0:
		// the state carries from pass to pass and the result is the batch's
		// to the bit (the op is sequential in both).
		var single []float32
		for i := range rows {
			shift := func(x *tensor) *tensor {
				s := randTensor(t, b, rng, x.name, 1, x.cols, 0)
				copy(s.data, x.row(i))
				return s
			}
			o1 := randTensor(t, b, rng, "o1", 1, out.cols, 0)
			pass(t, b, 1, i, func() { b.DeltaNet(o1, shift(q), shift(k), shift(v), shift(g), shift(beta), 1, spec) })
			single = append(single, o1.data...)
		}
		for i := range single {
			if single[i] != batch[i] {
				t.Fatalf("D=%d: token-by-token output %d is %v, the batch's %v", D, i, single[i], batch[i])
			}
		}
		for _, x := range b.rs.delta[0] {
			if x != 0 {
				t.Fatal("layer 1's delta rule wrote layer 0's state")
			}
		}
	}
}

func TestRecurrentStateSnapshot(t *testing.T) {
	spec := infer.DeltaNetSpec{KHeads: 1, VHeads: 2, HeadDim: 16}
	b := newTestBackend(t, 1)
	rs := recurrentSpec(8, 3, spec.VHeads, spec.HeadDim)
	if err := b.NewRecurrentState(rs); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(15, 16))
	q := randTensor(t, b, rng, "q", 2, 16, 0.25)
	k := randTensor(t, b, rng, "k", 2, 16, 0.25)
	v := randTensor(t, b, rng, "v", 2, 32, 1)
	g := randTensor(t, b, rng, "g", 2, 2, 0)
	beta := randTensor(t, b, rng, "beta", 2, 2, 0)
	for i := range beta.data {
		beta.data[i] = 0.5
	}
	out := randTensor(t, b, rng, "out", 2, 32, 0)
	run := func(pos int) []float32 {
		pass(t, b, 2, pos, func() { b.DeltaNet(out, q, k, v, g, beta, 0, spec) })
		return append([]float32(nil), out.data...)
	}
	run(0)
	snap := make([]float32, rs.Floats())
	if err := b.ReadRecurrentState(snap); err != nil {
		t.Fatal(err)
	}
	first := run(2)
	second := run(4) // a different state: the past grew
	if err := b.WriteRecurrentState(snap); err != nil {
		t.Fatal(err)
	}
	again := run(2)
	for i := range first {
		if again[i] != first[i] {
			t.Fatalf("after restoring the snapshot output %d is %v, want %v", i, again[i], first[i])
		}
	}
	same := true
	for i := range first {
		same = same && first[i] == second[i]
	}
	if same {
		t.Fatal("continuing the state changed nothing: the snapshot test cannot tell states apart")
	}
	if err := b.ReadRecurrentState(make([]float32, 3)); !errors.Is(err, infer.ErrBadShape) {
		t.Fatalf("reading into a short slice: %v, want ErrBadShape", err)
	}
}

func TestRecurrentBadShapes(t *testing.T) {
	b := newTestBackend(t, 1)
	if err := b.NewRecurrentState(recurrentSpec(8, 4, 2, 16)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(17, 18))
	x := randTensor(t, b, rng, "x", 2, 8, 1)
	y := randTensor(t, b, rng, "y", 2, 8, 1)
	w := f32Weight(t, b, "w", make([]float32, 3*8), 3, 8) // 3 taps, the state has 4
	for name, op := range map[string]func(){
		"conv width":   func() { b.CausalConv(y, x, w, 0) },
		"conv layer":   func() { b.CausalConv(y, x, w, 2) },
		"l2 group":     func() { b.L2Norm(y, x, 3, 1e-6) },
		"unary act":    func() { b.Unary(y, x, infer.Act(99)) },
		"deltanet dim": func() { b.DeltaNet(y, x, x, x, x, x, 0, infer.DeltaNetSpec{KHeads: 1, VHeads: 2, HeadDim: 4}) },
	} {
		b.Begin(infer.Batch{Tokens: make([]int32, 2)})
		op()
		if err := b.Commit(); !errors.Is(err, infer.ErrBadShape) {
			t.Errorf("%s: %v, want ErrBadShape", name, err)
		}
	}
}

// BenchmarkDeltaNet is one decode token of one 27B DeltaNet layer (48 V
// heads of 128).
func BenchmarkDeltaNet(b *testing.B) {
	spec := infer.DeltaNetSpec{KHeads: 16, VHeads: 48, HeadDim: 128}
	be, err := New(infer.BackendOptions{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	if err := be.NewRecurrentState(infer.RecurrentSpec{Layers: 1, Channels: 8, ConvWidth: 2, VHeads: 48, HeadDim: 128}); err != nil {
		b.Fatal(err)
	}
	mk := func(cols int) *tensor {
		x, _ := be.NewTensor("x", 1, cols)
		ct := x.(*tensor)
		for i := range ct.data {
			ct.data[i] = 0.01 * float32(i%7)
		}
		return ct
	}
	q, k, v, g, beta, out := mk(16*128), mk(16*128), mk(48*128), mk(48), mk(48), mk(48*128)
	for i := range g.data {
		g.data[i], beta.data[i] = -0.1, 0.5
	}
	b.ResetTimer()
	for i := range b.N {
		be.Begin(infer.Batch{Tokens: []int32{0}, Pos: 1 + i%100})
		be.DeltaNet(out, q, k, v, g, beta, 0, spec)
		if err := be.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
