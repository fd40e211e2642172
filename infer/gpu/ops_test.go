package gpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// newTestBackend opens the GPU backend or skips when there is no adapter,
// except in CI (CI=true), where lavapipe must be installed and a missing
// adapter is a failure.
func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	b, err := New(DeviceOptions{Adapter: os.Getenv("BONSAI_GPU_ADAPTER"), AllowSoftware: true}, infer.BackendOptions{})
	if err != nil {
		if errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// newUnfusedTestBackend is newTestBackend encoding every op as its own
// dispatch: the reference the fusion tests compare against.
func newUnfusedTestBackend(t testing.TB) *Backend {
	b := newTestBackend(t)
	b.noFuse = true
	return b
}

func randFloats(r *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

func quantizeMatrix(t *testing.T, typ gguf.Type, rows, k int, vals []float32) []byte {
	t.Helper()
	rb, err := typ.RowBytes(int64(k))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, int(rb)*rows)
	for r := 0; r < rows; r++ {
		if err := quant.QuantizeRow(typ, vals[r*k:(r+1)*k], out[r*int(rb):(r+1)*int(rb)]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// refMatMul is llama.cpp's CPU matmul: activations quantized to the vec-dot
// type, then quant.Dot per row.
func refMatMul(typ gguf.Type, w []byte, m, k int, x []float32, n int) []float32 {
	rb, _ := typ.RowBytes(int64(k))
	ab, _ := quant.ActivationBytes(typ, k)
	out := make([]float32, n*m)
	xq := make([]byte, ab)
	for i := 0; i < n; i++ {
		quant.QuantizeActivations(typ, x[i*k:(i+1)*k], xq)
		for r := 0; r < m; r++ {
			out[i*m+r] = quant.Dot(typ, k, w[r*int(rb):(r+1)*int(rb)], xq)
		}
	}
	return out
}

func maxRelErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		num = math.Max(num, math.Abs(float64(got[i]-want[i])))
		den = math.Max(den, math.Abs(float64(want[i])))
	}
	if den == 0 {
		return num
	}
	return num / den
}

func (b *Backend) mustTensor(t testing.TB, name string, rows, cols int) *tensor {
	t.Helper()
	x, err := b.NewTensor(name, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return x.(*tensor)
}

func (b *Backend) write(t testing.TB, x *tensor, vals []float32) {
	t.Helper()
	if err := b.d.queue.WriteBuffer(x.buf, 0, floatsToBytes(vals)); err != nil {
		t.Fatal(err)
	}
}

func batchOf(n, pos int) infer.Batch {
	return infer.Batch{Tokens: make([]int32, n), Pos: pos}
}

func TestMatMulMatchesCPU(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		typ  gguf.Type
		m, k int
		n    int
		tol  float64
	}{
		{gguf.Q1_0, 64, 512, 1, 1e-5},
		{gguf.Q1_0, 96, 1024, 5, 1e-5},
		{gguf.Q1_0, 40, 128, 9, 1e-5},
		{gguf.Q1_0, 128, 256, 70, 1e-5}, // tiled GEMM, two token tiles
		{gguf.Q1_0, 64, 1024, 3, 1e-5},
		{gguf.Q1_0, 96, 4096, 1, 1e-5}, // K of 4096: 32 blocks a row
		{gguf.Q8_0, 32, 256, 1, 1e-5},
		{gguf.Q4_0, 48, 256, 3, 1e-5},
		{gguf.Q2_0, 16, 256, 2, 1e-5},
		{gguf.Q4_K, 16, 512, 2, 1e-5},
		{gguf.Q6_K, 16, 256, 1, 1e-5},
		{gguf.F16, 16, 64, 3, 1e-5},
		{gguf.BF16, 16, 64, 1, 1e-5},
		{gguf.F32, 8, 64, 2, 1e-5},
	}
	for ci, c := range cases {
		t.Run(c.typ.String(), func(t *testing.T) {
			wv := randFloats(r, c.m*c.k, 1)
			wb := quantizeMatrix(t, c.typ, c.m, c.k, wv)
			// every other Q1_0 case in the attention projections' interleaved layout
			w, err := b.LoadWeight(infer.WeightData{Name: fmt.Sprintf("blk.0.%s.%s-%d-%d", []string{"attn_q", "ffn_up"}[ci%2], c.typ, c.m, c.k), Type: c.typ, Shape: []int64{int64(c.k), int64(c.m)}, Data: wb})
			if err != nil {
				t.Fatal(err)
			}
			x := b.mustTensor(t, "x", c.n, c.k)
			y := b.mustTensor(t, "y", c.n, c.m)
			xv := randFloats(r, c.n*c.k, 1)
			b.write(t, x, xv)
			got := make([]float32, c.n*c.m)
			b.Begin(batchOf(c.n, 0))
			b.MatMul(y, w, x)
			b.Read(y, got)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			want := refMatMul(c.typ, wb, c.m, c.k, xv, c.n)
			if e := maxRelErr(got, want); e > c.tol {
				t.Errorf("%s %d×%d n=%d: max error %.3g of the largest value (tolerance %g); got[0:4] %v want %v",
					c.typ, c.m, c.k, c.n, e, c.tol, got[:4], want[:4])
			}
		})
	}
}

func TestNormRopeElementwise(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(3, 4))
	const n, heads, hd = 3, 4, 16
	cols := heads * hd
	if err := b.NewKVCache(infer.KVSpec{Layers: 1, Context: 64, KVHeads: 1, HeadDim: hd}); err != nil {
		t.Fatal(err)
	}
	nw := randFloats(r, cols, 1)
	hw := randFloats(r, hd, 1)
	norm, err := b.LoadWeight(infer.WeightData{Name: "norm", Type: gguf.F32, Shape: []int64{int64(cols)}, Data: floatsToBytes(nw)})
	if err != nil {
		t.Fatal(err)
	}
	hnorm, err := b.LoadWeight(infer.WeightData{Name: "hnorm", Type: gguf.F32, Shape: []int64{hd}, Data: floatsToBytes(hw)})
	if err != nil {
		t.Fatal(err)
	}
	xv := randFloats(r, n*cols, 2)
	yv := randFloats(r, n*cols, 2)
	x, y := b.mustTensor(t, "x", n, cols), b.mustTensor(t, "y", n, cols)
	z, last := b.mustTensor(t, "z", n, cols), b.mustTensor(t, "last", 1, cols)
	b.write(t, x, xv)
	b.write(t, y, yv)
	rope := infer.Rope{HeadDim: hd, Dims: hd, Base: 10000, FreqScale: 0.25, ExtFactor: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigContext: 16}
	const eps = 1e-6
	const pos = 7

	gotNorm := make([]float32, n*cols)
	gotHead := make([]float32, n*cols)
	gotSwi := make([]float32, n*cols)
	gotAdd := make([]float32, n*cols)
	gotLast := make([]float32, cols)
	gotArg := make([]int32, n)
	b.Begin(batchOf(n, pos))
	b.RMSNorm(z, x, norm, eps)
	b.Read(z, gotNorm)
	b.RMSNorm(z, z, hnorm, eps) // in place, per head
	b.Rope(z, rope)
	b.Read(z, gotHead)
	b.SwiGLU(z, x, y)
	b.Read(z, gotSwi)
	b.Add(z, z, y)
	b.Read(z, gotAdd)
	b.LastRow(last, z)
	b.Read(last, gotLast)
	b.Argmax(z, gotArg)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	rms := func(v, w []float32) []float32 {
		out := make([]float32, len(v))
		g := len(w)
		for s := 0; s < len(v); s += g {
			var ss float32
			for _, a := range v[s : s+g] {
				ss += a * a
			}
			sc := float32(1 / math.Sqrt(float64(ss/float32(g)+eps)))
			for j := 0; j < g; j++ {
				out[s+j] = v[s+j] * sc * w[j]
			}
		}
		return out
	}
	wantNorm := rms(xv, nw)
	check := func(name string, got, want []float32, tol float64) {
		t.Helper()
		if e := maxRelErr(got, want); e > tol {
			t.Errorf("%s: max error %.3g (tolerance %g): got[0:4] %v want %v", name, e, tol, got[:4], want[:4])
		}
	}
	check("RMSNorm", gotNorm, wantNorm, 1e-5)
	wantHead := rms(wantNorm, hw)
	cs, sn := make([]float32, hd/2), make([]float32, hd/2)
	for i := 0; i < n; i++ {
		rope.Angles(pos+i, cs, sn)
		for h := 0; h < heads; h++ {
			o := i*cols + h*hd
			for j := 0; j < hd/2; j++ {
				a, c := wantHead[o+j], wantHead[o+j+hd/2]
				wantHead[o+j] = a*cs[j] - c*sn[j]
				wantHead[o+j+hd/2] = a*sn[j] + c*cs[j]
			}
		}
	}
	check("head RMSNorm + RoPE", gotHead, wantHead, 1e-5)
	wantSwi := make([]float32, n*cols)
	wantAdd := make([]float32, n*cols)
	for i := range wantSwi {
		g := float64(xv[i])
		wantSwi[i] = float32(g / (1 + math.Exp(-g)) * float64(yv[i]))
		wantAdd[i] = wantSwi[i] + yv[i]
	}
	check("SwiGLU", gotSwi, wantSwi, 1e-5)
	check("Add", gotAdd, wantAdd, 1e-5)
	check("LastRow", gotLast, wantAdd[(n-1)*cols:], 1e-6)
	for i := 0; i < n; i++ {
		best := 0
		for j, v := range wantAdd[i*cols : (i+1)*cols] {
			if v > wantAdd[i*cols+best] {
				best = j
			}
		}
		if int(gotArg[i]) != best {
			t.Errorf("Argmax row %d: got %d want %d", i, gotArg[i], best)
		}
	}
}

// TestAttentionMatchesReference covers grouped-query attention with a
// power-of-two group (2 query heads per kv head) and an odd one (3, as in
// bonsai-tiny), without a window and with sliding windows (Attn.Window)
// shorter than the prompt, the decode's splits and the one-pass decode.
func TestAttentionMatchesReference(t *testing.T) {
	for _, g := range []struct{ heads, kvHeads, window int }{{4, 2, 0}, {6, 2, 0}, {4, 2, 100}, {6, 2, 7}} {
		t.Run(fmt.Sprintf("%d-per-kv-head-window%d", g.heads/g.kvHeads, g.window), func(t *testing.T) {
			attentionMatchesReference(t, g.heads, g.kvHeads, g.window)
		})
	}
}

func attentionMatchesReference(t *testing.T, heads, kvHeads, window int) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(5, 6))
	const hd, ctx = 32, 1024
	a := infer.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(hd)), Window: window}
	kvd := kvHeads * hd
	if err := b.NewKVCache(infer.KVSpec{Layers: 2, Context: ctx, KVHeads: kvHeads, HeadDim: hd}); err != nil {
		t.Fatal(err)
	}
	// Fill positions 0..599 of layer 1 by a prefill of 600, then decode
	// one more at 600 (which uses several splits).
	const pre = 600
	kvals := randFloats(r, (pre+1)*kvd, 1)
	vvals := randFloats(r, (pre+1)*kvd, 1)
	qvals := randFloats(r, (pre+1)*heads*hd, 1)
	k, v := b.mustTensor(t, "k", pre, kvd), b.mustTensor(t, "v", pre, kvd)
	q, out := b.mustTensor(t, "q", pre, heads*hd), b.mustTensor(t, "out", pre, heads*hd)
	b.write(t, k, kvals[:pre*kvd])
	b.write(t, v, vvals[:pre*kvd])
	b.write(t, q, qvals[:pre*heads*hd])
	gotPre := make([]float32, pre*heads*hd)
	b.Begin(batchOf(pre, 0))
	b.StoreKV(1, k, v)
	b.Attention(out, q, 1, a)
	b.Read(out, gotPre)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	k1, v1 := b.mustTensor(t, "k1", 1, kvd), b.mustTensor(t, "v1", 1, kvd)
	q1, out1 := b.mustTensor(t, "q1", 1, heads*hd), b.mustTensor(t, "out1", 1, heads*hd)
	b.write(t, k1, kvals[pre*kvd:])
	b.write(t, v1, vvals[pre*kvd:])
	b.write(t, q1, qvals[pre*heads*hd:])
	gotDec := make([]float32, heads*hd)
	b.Begin(batchOf(1, pre))
	b.StoreKV(1, k1, v1)
	b.Attention(out1, q1, 1, a)
	b.Read(out1, gotDec)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	// The reference follows llama.cpp's CPU graph: q and the softmax
	// weights rounded to f16, K and V from the f16 cache. A last-bit
	// difference in a weight can cross an f16 rounding boundary (one f16
	// step, ~5e-4 of that weight), hence 1e-4 rather than f32 precision.
	f16 := func(x float32) float32 { return quant.F16ToF32(quant.F32ToF16(x)) }
	ref := func(p int) []float32 {
		out := make([]float32, heads*hd)
		for h := 0; h < heads; h++ {
			g := h / (heads / kvHeads)
			s := make([]float64, p+1)
			mx := math.Inf(-1)
			for tt := 0; tt <= p; tt++ {
				if window > 0 && p-tt >= window { // llama.cpp's mask
					s[tt] = math.Inf(-1)
					continue
				}
				var d float64
				for j := 0; j < hd; j++ {
					d += float64(f16(qvals[p*heads*hd+h*hd+j])) * float64(f16(kvals[tt*kvd+g*hd+j]))
				}
				s[tt] = d * float64(a.Scale)
				mx = math.Max(mx, s[tt])
			}
			var sum float64
			for tt := range s {
				s[tt] = math.Exp(s[tt] - mx)
				sum += s[tt]
			}
			for j := 0; j < hd; j++ {
				var acc float64
				for tt := range s {
					acc += float64(f16(float32(s[tt]/sum))) * float64(f16(vvals[tt*kvd+g*hd+j]))
				}
				out[h*hd+j] = float32(acc)
			}
		}
		return out
	}
	for _, p := range []int{0, 1, 255, 256, 599} {
		want := ref(p)
		if e := maxRelErr(gotPre[p*heads*hd:(p+1)*heads*hd], want); e > 1e-4 {
			t.Errorf("prefill row %d: max error %.3g", p, e)
		}
	}
	if e := maxRelErr(gotDec, ref(pre)); e > 1e-4 {
		t.Errorf("decode at %d: max error %.3g", pre, e)
	}

	// A decode over ≤ 32 positions (one split) runs as one dispatch
	// (attn_one): redo position 20 with the prefill's own k, v and q for it.
	const short = 20
	k2, v2 := b.mustTensor(t, "k2", 1, kvd), b.mustTensor(t, "v2", 1, kvd)
	q2, out2 := b.mustTensor(t, "q2", 1, heads*hd), b.mustTensor(t, "out2", 1, heads*hd)
	b.write(t, k2, kvals[short*kvd:(short+1)*kvd])
	b.write(t, v2, vvals[short*kvd:(short+1)*kvd])
	b.write(t, q2, qvals[short*heads*hd:(short+1)*heads*hd])
	gotShort := make([]float32, heads*hd)
	b.Begin(batchOf(1, short))
	b.StoreKV(1, k2, v2)
	b.Attention(out2, q2, 1, a)
	b.Read(out2, gotShort)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := b.LastDispatches(); got != 2 {
		t.Errorf("decode at %d: %d dispatches, want 2 (store, one-pass attention)", short, got)
	}
	if e := maxRelErr(gotShort, ref(short)); e > 1e-4 {
		t.Errorf("decode at %d: max error %.3g", short, e)
	}
}

func TestEmbed(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_0} {
		const vocab, k = 50, 256
		wb := quantizeMatrix(t, typ, vocab, k, randFloats(r, vocab*k, 1))
		w, err := b.LoadWeight(infer.WeightData{Name: "emb" + typ.String(), Type: typ, Shape: []int64{k, vocab}, Data: wb})
		if err != nil {
			t.Fatal(err)
		}
		x := b.mustTensor(t, "x", 4, k)
		toks := []int32{3, 49, 0, 3}
		got := make([]float32, 4*k)
		b.Begin(infer.Batch{Tokens: toks})
		b.Embed(x, w)
		b.Read(x, got)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		rb, _ := typ.RowBytes(k)
		want := make([]float32, 4*k)
		for i, tok := range toks {
			if err := quant.DequantizeRow(typ, wb[int(rb)*int(tok):int(rb)*int(tok+1)], want[i*k:(i+1)*k]); err != nil {
				t.Fatal(err)
			}
		}
		if e := maxRelErr(got, want); e != 0 {
			t.Errorf("%s: embedding differs (max error %g)", typ, e)
		}
		b.Begin(infer.Batch{Tokens: []int32{vocab}})
		b.Embed(x, w)
		if err := b.Commit(); !errors.Is(err, infer.ErrBadShape) {
			t.Errorf("%s: token past the vocabulary: got %v, want ErrBadShape", typ, err)
		}
	}
}

// TestFusedMatVec covers the decode fusions: three matrices loaded one
// after another and multiplied by the same x become one dispatch (with
// every decode kernel), and a residual Add right after a matvec
// folds into it; results must equal the unfused ones.
func TestFusedMatVec(t *testing.T) {
	for _, k := range []int{256, 2048} {
		for _, kernel := range []string{"q1_w1", "q1_matvec", "q1_popc"} {
			b := newTestBackend(t)
			b.forceMatVec = kernel
			r := rand.New(rand.NewPCG(9, uint64(k)))
			ms := []int{128, 64, 64}
			// every Q1_0 matrix is block-interleaved now (repackQ1); the
			// names only say which roles the matrices play
			names := []string{"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_x.weight", "blk.0.ffn_down.weight"}
			if kernel != "q1_popc" {
				names = []string{"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"}
			}
			var ws []infer.Weight
			var wbs [][]byte
			for i, m := range ms {
				wb := quantizeMatrix(t, gguf.Q1_0, m, k, randFloats(r, m*k, 1))
				w, err := b.LoadWeight(infer.WeightData{Name: names[i], Type: gguf.Q1_0, Shape: []int64{int64(k), int64(m)}, Data: wb})
				if err != nil {
					t.Fatal(err)
				}
				ws, wbs = append(ws, w), append(wbs, wb)
			}
			// the output projection: 128 back to k
			wo := quantizeMatrix(t, gguf.Q1_0, k, 128, randFloats(r, k*128, 1))
			o, err := b.LoadWeight(infer.WeightData{Name: names[3], Type: gguf.Q1_0, Shape: []int64{128, int64(k)}, Data: wo})
			if err != nil {
				t.Fatal(err)
			}
			xv := randFloats(r, k, 1)
			resid0 := randFloats(r, k, 1)
			x, resid, h := b.mustTensor(t, "x", 1, k), b.mustTensor(t, "resid", 1, k), b.mustTensor(t, "h", 1, k)
			outs := []*tensor{b.mustTensor(t, "o0", 1, 128), b.mustTensor(t, "o1", 1, 64), b.mustTensor(t, "o2", 1, 64)}
			b.write(t, x, xv)
			b.write(t, resid, resid0)
			got := [][]float32{make([]float32, 128), make([]float32, 64), make([]float32, 64)}
			gotH, gotResid := make([]float32, k), make([]float32, k)
			b.Begin(batchOf(1, 0))
			for i := range ws {
				b.MatMul(outs[i], ws[i], x)
			}
			b.MatMul(h, o, outs[0])
			b.Add(resid, resid, h)
			for i := range outs {
				b.Read(outs[i], got[i])
			}
			b.Read(h, gotH)
			b.Read(resid, gotResid)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			for i, m := range ms {
				want := refMatMul(gguf.Q1_0, wbs[i], m, k, xv, 1)
				if e := maxRelErr(got[i], want); e > 1e-5 {
					t.Errorf("K=%d kernel=%s: output %d: max error %.3g", k, kernel, i, e)
				}
			}
			wantH := refMatMul(gguf.Q1_0, wo, k, 128, got[0], 1)
			if e := maxRelErr(gotH, wantH); e > 1e-5 {
				t.Errorf("K=%d kernel=%s: output projection: max error %.3g", k, kernel, e)
			}
			wantResid := make([]float32, k)
			for i := range wantResid {
				wantResid[i] = resid0[i] + gotH[i]
			}
			if e := maxRelErr(gotResid, wantResid); e > 1e-6 {
				t.Errorf("K=%d kernel=%s: residual: max error %.3g", k, kernel, e)
			}
			if n := len(b.ops); n != 2 {
				t.Errorf("K=%d kernel=%s: %d prepared ops, want 2 (fused q/k/v, projection+add)", k, kernel, n)
			}
		}
	}
}

// TestF16RoundingMatchesCPU pins the GPU's f16 rounding (activations
// rounded for F16 weights; the same f16_round rounds Q8_0 scales, K/V and
// attention weights) to the CPU's round-to-nearest-even, on values where a
// driver's pack2x16float that truncates or rounds ties away would differ:
// exact midpoints between neighbouring f16 values (ties go to the even
// one), a hair either side of them, and the subnormal range. An identity
// F16 matrix makes the matmul return the rounded activations exactly.
func TestF16RoundingMatchesCPU(t *testing.T) {
	b := newTestBackend(t)
	const k = 128
	r := rand.New(rand.NewPCG(3, 4))
	xv := make([]float32, k)
	for i := range xv {
		h := uint16(r.IntN(0x7800)) // finite, well below 65504
		lo, hi := quant.F16ToF32(h), quant.F16ToF32(h+1)
		mid := lo + (hi-lo)/2
		switch i % 4 {
		case 0:
			xv[i] = mid
		case 1:
			xv[i] = math.Nextafter32(mid, 0)
		case 2:
			xv[i] = math.Nextafter32(mid, float32(math.Inf(1)))
		default:
			xv[i] = quant.F16ToF32(uint16(r.IntN(0x400))) * 1.37 // subnormal f16
		}
		if r.IntN(2) == 0 {
			xv[i] = -xv[i]
		}
	}
	id := make([]float32, k*k)
	for i := 0; i < k; i++ {
		id[i*k+i] = 1
	}
	w, err := b.LoadWeight(infer.WeightData{Name: "id16", Type: gguf.F16, Shape: []int64{k, k}, Data: quantizeMatrix(t, gguf.F16, k, k, id)})
	if err != nil {
		t.Fatal(err)
	}
	x, y := b.mustTensor(t, "x", 1, k), b.mustTensor(t, "y", 1, k)
	b.write(t, x, xv)
	got := make([]float32, k)
	b.Begin(batchOf(1, 0))
	b.MatMul(y, w, x)
	b.Read(y, got)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, v := range xv {
		if want := quant.F16ToF32(quant.F32ToF16(v)); got[i] != want {
			t.Errorf("f16 of %g (%#08x): GPU %g, CPU %g", v, math.Float32bits(v), got[i], want)
		}
	}
}

// A long pass goes to the GPU in several command buffers (submitPiece);
// a chain of dependent in-place adds across the pieces must still see each
// previous add's result.
func TestPassInPiecesKeepsOrder(t *testing.T) {
	b := newTestBackend(t)
	const cols, steps = 256, 3 * submitEvery
	x, y := b.mustTensor(t, "x", 1, cols), b.mustTensor(t, "y", 1, cols)
	xv, yv := make([]float32, cols), make([]float32, cols)
	for i := range xv {
		xv[i], yv[i] = float32(i), float32(i%7)+0.5
	}
	b.write(t, x, xv)
	b.write(t, y, yv)
	got := make([]float32, cols)
	b.Begin(batchOf(1, 0))
	for i := 0; i < steps; i++ {
		b.Add(x, x, y)
	}
	b.Read(x, got)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if b.submits < 3 {
		t.Errorf("%d dispatches went in %d pieces", b.lastDispatches, b.submits+1)
	}
	for i := range got {
		if want := xv[i] + steps*yv[i]; got[i] != want {
			t.Fatalf("x[%d] = %g after %d adds, want %g", i, got[i], steps, want)
		}
	}
}

// TestQuantizedOnce covers the decode FFN with activations rounded to
// Q8_0 once by their producers (act_q8 or rmsnorm's Q8 output; gate/up's
// SwiGLU epilogue in q1_xq): the norm must equal the unfused one, each
// step must match the CPU on the GPU's own inputs, in three dispatches
// (norm, gate/up with SwiGLU, down).
func TestQuantizedOnce(t *testing.T) {
	for _, c := range []struct{ k, f int }{{1024, 1024}, {1024, 3072}, {256, 512}, {2048, 1024}, {512, 1024}, {1024, 2048}} {
		k, f := c.k, c.f
		r := rand.New(rand.NewPCG(11, uint64(k)))
		nw := randFloats(r, k, 1)
		xv := randFloats(r, k, 1)
		wgv, wuv, wdv := randFloats(r, f*k, 1), randFloats(r, f*k, 1), randFloats(r, k*f, 1)
		wg, wu, wd := quantizeMatrix(t, gguf.Q1_0, f, k, wgv), quantizeMatrix(t, gguf.Q1_0, f, k, wuv), quantizeMatrix(t, gguf.Q1_0, k, f, wdv)
		run := func(b *Backend) (h, g, u, y []float32, dispatches int) {
			t.Helper()
			load := func(name string, typ gguf.Type, shape []int64, data []byte) infer.Weight {
				w, err := b.LoadWeight(infer.WeightData{Name: name, Type: typ, Shape: shape, Data: data})
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			norm := load("blk.0.ffn_norm.weight", gguf.F32, []int64{int64(k)}, floatsToBytes(nw))
			gate := load("blk.0.ffn_gate.weight", gguf.Q1_0, []int64{int64(k), int64(f)}, wg)
			up := load("blk.0.ffn_up.weight", gguf.Q1_0, []int64{int64(k), int64(f)}, wu)
			down := load("blk.0.ffn_down.weight", gguf.Q1_0, []int64{int64(f), int64(k)}, wd)
			x, ht, gt, ut, yt := b.mustTensor(t, "x", 1, k), b.mustTensor(t, "h", 1, k), b.mustTensor(t, "g", 1, f), b.mustTensor(t, "u", 1, f), b.mustTensor(t, "y", 1, k)
			b.write(t, x, xv)
			h, g, u, y = make([]float32, k), make([]float32, f), make([]float32, f), make([]float32, k)
			b.Begin(batchOf(1, 0))
			b.RMSNorm(ht, x, norm, 1e-6)
			b.MatMul(gt, gate, ht)
			b.MatMul(ut, up, ht)
			b.SwiGLU(gt, gt, ut)
			b.MatMul(yt, down, gt)
			b.Read(ht, h)
			b.Read(gt, g)
			b.Read(ut, u)
			b.Read(yt, y)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			return h, g, u, y, b.LastDispatches()
		}
		fused := newTestBackend(t)
		plain := newUnfusedTestBackend(t)
		h, g, u, y, nf := run(fused)
		ph, _, _, _, np := run(plain)
		if e := maxRelErr(h, ph); e != 0 {
			t.Errorf("K=%d: the norm differs from the unfused one by %.3g", k, e)
		}
		if nf != 3 || np != 4 {
			t.Errorf("K=%d F=%d: %d dispatches (unfused %d), want 3 (4)", k, f, nf, np)
		}
		xq := false
		for key := range fused.d.kernels {
			xq = xq || strings.HasPrefix(key, "q1_xq ")
		}
		if !xq {
			t.Errorf("K=%d F=%d: q1_xq was not used", k, f)
		}
		// each step against the CPU, on the GPU's inputs
		var ss float64
		for _, v := range xv {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(k)+1e-6)
		wantH := make([]float32, k)
		for i := range wantH {
			wantH[i] = float32(float64(xv[i]) * scale * float64(nw[i]))
		}
		if e := maxRelErr(h, wantH); e > 1e-6 {
			t.Errorf("K=%d F=%d: norm off by %.3g", k, f, e)
		}
		// the fused kernel overwrote gate with SwiGLU: recompute gate
		wantG := refMatMul(gguf.Q1_0, wg, f, k, h, 1)
		wantU := refMatMul(gguf.Q1_0, wu, f, k, h, 1)
		wantS := make([]float32, f)
		for i := range wantS {
			gv := float64(wantG[i])
			wantS[i] = float32(gv / (1 + math.Exp(-gv)) * float64(wantU[i]))
		}
		if e := maxRelErr(u, wantU); e > 1e-5 {
			t.Errorf("K=%d F=%d: up off by %.3g", k, f, e)
		}
		if e := maxRelErr(g, wantS); e > 1e-5 {
			t.Errorf("K=%d F=%d: SwiGLU off by %.3g", k, f, e)
		}
		if e := maxRelErr(y, refMatMul(gguf.Q1_0, wd, k, f, g, 1)); e > 1e-5 {
			t.Errorf("K=%d F=%d: down off by %.3g", k, f, e)
		}
	}
}

// TestAttnQKMatchesUnfused covers a decode layer's attention prologue
// folded into the split path (attn_qk, attn_pv on its stored scores,
// attn_sum; qk_rope_store and attn_one over one split), with attn_lat
// off, at sequences on both sides of one split (32). The output must equal the unfused ops' (norm_rope,
// store_kv, attn_stats, attn_pv, attn_sum; 6 dispatches), and so must q
// and k when read afterwards (rotated in place on demand). Both cache
// layers give the same output for the same tokens, and the second layer
// compiles nothing of its own (kvBind binds its rows at an offset) except
// with an odd context (three kv heads), where the rows are not bindable at
// an offset and the kernels take the layer's offset as a constant.
func TestAttnQKMatchesUnfused(t *testing.T) {
	// the dispatches wanted before the reads at a sequence of pre+1
	want := func(pre int) int {
		if pre+1 <= 32 {
			return 2
		}
		return 3
	}
	// heads, kv heads, head dim, RoPE dims, context, prefill before the
	// decode (the 8B's 32/8 heads of 128 in the last)
	for _, c := range []struct{ heads, kvHeads, hd, dims, ctx, pre int }{
		{8, 2, 64, 64, 256, 100}, {8, 2, 64, 64, 256, 20}, {8, 2, 64, 64, 256, 63}, {6, 2, 64, 32, 256, 100},
		{6, 3, 64, 64, 251, 200}, {6, 3, 64, 64, 251, 31}, {6, 3, 64, 64, 251, 12}, {32, 8, 128, 128, 256, 150}} {
		t.Run(fmt.Sprintf("%d-%d-%d-%d-%d", c.heads, c.kvHeads, c.hd, c.dims, c.pre), func(t *testing.T) {
			attnQKMatchesUnfused(t, c.heads, c.kvHeads, c.hd, c.dims, c.ctx, c.pre, 0, infer.KVTypes{}, func(b *Backend) { b.latMax = 0 }, 1e-6, want(c.pre))
		})
	}
}

// TestAttnLatMatchesUnfused covers attn_lat (a decode layer's prologue and
// attention in one dispatch up to latLongMaxPos positions, or a limit
// lowered to latShortMax, the split path past it) against the unfused ops, at
// sequences around its rounds of 32 positions and past its limit, for 1,
// 2, 4 and 8 query heads per kv head and heads of 64 and 128. Its sums run
// in another order than the split path's, so a softmax weight may round
// to the neighbouring f16 (as TestAttentionMatchesReference allows):
// 1e-4 of the largest output.
func TestAttnLatMatchesUnfused(t *testing.T) {
	// attn_lat's limit lowered to 4 rounds of 32 positions, to cross it
	// at shorter sequences
	const latShortMax = 128
	for _, c := range []struct{ heads, kvHeads, hd, dims, ctx, pre, max int }{
		{4, 4, 64, 64, 256, 0, latShortMax}, {8, 2, 64, 64, 256, 1, latShortMax}, {16, 4, 128, 128, 256, 14, latShortMax}, {16, 2, 128, 64, 256, 15, latShortMax},
		{8, 2, 64, 64, 256, 16, latShortMax}, {32, 8, 128, 128, 256, 30, latShortMax}, {6, 3, 64, 64, 251, 31, latShortMax}, {8, 2, 128, 128, 256, 32, latShortMax},
		{16, 2, 64, 64, 256, 63, latShortMax}, {8, 2, 64, 32, 256, 64, latShortMax}, {32, 8, 128, 128, 256, 99, latShortMax}, {4, 2, 64, 64, 256, 127, latShortMax},
		{4, 2, 64, 64, 256, 128, latShortMax}, {8, 2, 64, 64, 512, 299, latShortMax}, {8, 2, 64, 64, 1100, 1040, latShortMax},
		{32, 8, 128, 128, 512, 200, latLongMaxPos}, {8, 2, 64, 64, 512, 255, latLongMaxPos}, {8, 2, 64, 64, 512, 256, latLongMaxPos}} {
		want := 1
		if c.pre+1 > c.max {
			want = 3
		}
		t.Run(fmt.Sprintf("%d-%d-%d-%d-%d/%d", c.heads, c.kvHeads, c.hd, c.dims, c.pre, c.max), func(t *testing.T) {
			attnQKMatchesUnfused(t, c.heads, c.kvHeads, c.hd, c.dims, c.ctx, c.pre, 0, infer.KVTypes{}, func(b *Backend) { b.latMax = c.max }, 1e-4, want)
		})
	}
}

// TestAttnWindowMatchesUnfused covers the fused decode paths with a
// sliding window (Attn.Window): attn_lat while the sequence fits the
// window (one dispatch), and past it attn_qk over several splits (3) or,
// over one split, the prologue and attn_one (2), which
// TestAttentionMatchesReference checks against a reference.
func TestAttnWindowMatchesUnfused(t *testing.T) {
	for _, c := range []struct{ heads, kvHeads, hd, ctx, pre, window, dispatches int }{
		{8, 2, 64, 256, 30, 100, 1}, {8, 2, 64, 256, 100, 40, 3}, {6, 3, 64, 251, 200, 64, 3}, {8, 2, 64, 256, 20, 8, 2}} {
		t.Run(fmt.Sprintf("%d-%d-%d-%d-w%d", c.heads, c.kvHeads, c.hd, c.pre, c.window), func(t *testing.T) {
			attnQKMatchesUnfused(t, c.heads, c.kvHeads, c.hd, c.hd, c.ctx, c.pre, c.window, infer.KVTypes{}, func(*Backend) {}, 1e-4, c.dispatches)
		})
	}
}

// TestQ8AttnMatchesUnfused is TestAttnQKMatchesUnfused and
// TestAttnLatMatchesUnfused with a Q8_0 K, V or both: the fused kernels
// (qk_rope_store, attn_qk, attn_lat) quantize k and v as store_kv_q8 and q
// as the split passes do, in as many dispatches as with f16.
func TestQ8AttnMatchesUnfused(t *testing.T) {
	q8 := infer.KVQ8_0
	for _, kv := range []infer.KVTypes{{K: q8}, {V: q8}, {K: q8, V: q8}} {
		for _, c := range []struct{ heads, kvHeads, hd, dims, ctx, pre, max int }{
			{8, 2, 64, 64, 256, 100, 0}, {6, 3, 64, 64, 251, 12, 0}, {32, 8, 128, 128, 256, 150, 0},
			{8, 2, 64, 64, 256, 16, 128}, {16, 2, 128, 64, 256, 63, 128}, {6, 3, 64, 64, 251, 31, 128}, {8, 2, 64, 64, 512, 299, 128}} {
			want, tol := 1, 1e-4
			switch {
			case c.max == 0 && c.pre+1 <= 32:
				want, tol = 2, 1e-6
			case c.max == 0 || c.pre+1 > c.max:
				want, tol = 3, 1e-6
			}
			t.Run(fmt.Sprintf("%s/%d-%d-%d-%d-%d/%d", kv, c.heads, c.kvHeads, c.hd, c.dims, c.pre, c.max), func(t *testing.T) {
				attnQKMatchesUnfused(t, c.heads, c.kvHeads, c.hd, c.dims, c.ctx, c.pre, 0, kv, func(b *Backend) { b.latMax = c.max }, tol, want)
			})
		}
	}
	// attn_lat's most workgroup memory: 8 rounds of heads of 128, both
	// sides quantized
	t.Run("8-rounds", func(t *testing.T) {
		attnQKMatchesUnfused(t, 32, 8, 128, 128, 512, 200, 0, infer.KVTypes{K: q8, V: q8}, func(b *Backend) { b.latMax = latLongMaxPos }, 1e-4, 1)
	})
}

func attnQKMatchesUnfused(t *testing.T, heads, kvHeads, hd, dims, ctx, pre, window int, kvTypes infer.KVTypes, set func(*Backend), tol float64, wantDispatches int) {
	r := rand.New(rand.NewPCG(13, uint64(heads)))
	a := infer.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))), Window: window}
	rope := infer.Rope{HeadDim: hd, Dims: dims, Base: 10000, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1}
	kvd, qd := kvHeads*hd, heads*hd
	qn, kn := randFloats(r, hd, 1), randFloats(r, hd, 1)
	qv, kv, vv := randFloats(r, (pre+1)*qd, 1), randFloats(r, (pre+1)*kvd, 1), randFloats(r, (pre+1)*kvd, 1)
	run := func(b *Backend) (out, q1, k1 []float32, dispatches int) {
		t.Helper()
		if err := b.NewKVCache(infer.KVSpec{Layers: 2, Context: ctx, KVHeads: kvHeads, HeadDim: hd, KVTypes: kvTypes}); err != nil {
			t.Fatal(err)
		}
		load := func(name string, vals []float32) infer.Weight {
			w, err := b.LoadWeight(infer.WeightData{Name: name, Type: gguf.F32, Shape: []int64{int64(hd)}, Data: floatsToBytes(vals)})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		qw, kw := load("q_norm", qn), load("k_norm", kn)
		layer := func(n, pos, cache int, q, k, v, o []float32) {
			qt, kt, vt, ot := b.mustTensor(t, "q", n, qd), b.mustTensor(t, "k", n, kvd), b.mustTensor(t, "v", n, kvd), b.mustTensor(t, "o", n, qd)
			b.write(t, qt, q)
			b.write(t, kt, k)
			b.write(t, vt, v)
			b.Begin(batchOf(n, pos))
			b.RMSNorm(qt, qt, qw, 1e-6)
			b.RMSNorm(kt, kt, kw, 1e-6)
			b.Rope(qt, rope)
			b.Rope(kt, rope)
			b.StoreKV(cache, kt, vt)
			b.Attention(ot, qt, cache, a)
			b.Read(ot, o)
			if n == 1 && cache == 1 {
				dispatches = b.dispatches
				q1, k1 = make([]float32, qd), make([]float32, kvd)
				b.Read(qt, q1)
				b.Read(kt, k1)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		// the same tokens through both layers of the cache: equal
		// outputs, and no pipeline of its own for layer 1 where kvBind
		// can bind at an offset
		out0 := make([]float32, qd)
		if pre > 0 {
			layer(pre, 0, 0, qv[:pre*qd], kv[:pre*kvd], vv[:pre*kvd], make([]float32, pre*qd))
		}
		layer(1, pre, 0, qv[pre*qd:], kv[pre*kvd:], vv[pre*kvd:], out0)
		pipes := len(b.d.kernels)
		if pre > 0 {
			layer(pre, 0, 1, qv[:pre*qd], kv[:pre*kvd], vv[:pre*kvd], make([]float32, pre*qd))
		}
		out = make([]float32, qd)
		layer(1, pre, 1, qv[pre*qd:], kv[pre*kvd:], vv[pre*kvd:], out)
		if e := maxRelErr(out, out0); e != 0 {
			t.Errorf("%d heads: layers 0 and 1 differ by %.3g on the same tokens", heads, e)
		}
		if added := len(b.d.kernels) - pipes; (added == 0) != (ctx%2 == 0) {
			t.Errorf("%d heads, context %d: layer 1 added %d pipelines", heads, ctx, added)
		}
		return out, q1, k1, dispatches
	}
	fused := newTestBackend(t)
	set(fused)
	plain := newTestBackend(t)
	plain.noFuse = true
	out, q1, k1, nf := run(fused)
	pout, pq1, pk1, np := run(plain)
	if e := maxRelErr(out, pout); e > tol {
		t.Errorf("%d heads: attention differs from the unfused ops by %.3g", heads, e)
	}
	if e := maxRelErr(q1, pq1); e != 0 {
		t.Errorf("%d heads: q read after attention differs by %.3g", heads, e)
	}
	if e := maxRelErr(k1, pk1); e != 0 {
		t.Errorf("%d heads: k read after attention differs by %.3g", heads, e)
	}
	if nf != wantDispatches || np != 6 {
		t.Errorf("%d heads: %d dispatches before the reads (unfused %d), want %d (6)", heads, nf, np, wantDispatches)
	}
}
