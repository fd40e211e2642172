package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// windowRun stores n rows of k and v from position 0 (the rows before
// spoil replaced by large values), then runs attention with a over the
// rows [from, n), and returns their output rows.
func windowRun(t *testing.T, kv infer.KVTypes, a infer.Attn, qkv [3][]float32, n, from, spoil, threads int) [][]float32 {
	t.Helper()
	be, err := New(infer.BackendOptions{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.NewKVCache(infer.KVSpec{Layers: 1, Context: n + 8, KVHeads: a.KVHeads, HeadDim: a.HeadDim, KVTypes: kv}); err != nil {
		t.Fatal(err)
	}
	q, _ := be.NewTensor("q", n, a.Heads*a.HeadDim)
	k, _ := be.NewTensor("k", n, a.KVHeads*a.HeadDim)
	v, _ := be.NewTensor("v", n, a.KVHeads*a.HeadDim)
	out, _ := be.NewTensor("out", n, a.Heads*a.HeadDim)
	kvd := a.KVHeads * a.HeadDim
	var kvs [2][]float32
	for i := range kvs {
		kvs[i] = append([]float32(nil), qkv[i+1]...)
		for j := range spoil * kvd {
			kvs[i][j] = 1000 * float32(j%7-3)
		}
	}
	if from > 0 {
		copy(k.(*tensor).data, kvs[0])
		copy(v.(*tensor).data, kvs[1])
		be.Begin(infer.Batch{Tokens: make([]int32, from)})
		be.StoreKV(0, k, v)
		if err := be.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// the rows [from, n) as one pass
	rows := n - from
	qd := a.Heads * a.HeadDim
	copy(q.(*tensor).data, qkv[0][from*qd:])
	copy(k.(*tensor).data, kvs[0][from*kvd:])
	copy(v.(*tensor).data, kvs[1][from*kvd:])
	be.Begin(infer.Batch{Tokens: make([]int32, rows), Pos: from})
	be.StoreKV(0, k, v)
	be.Attention(out, q, 0, a)
	got := make([]float32, rows*qd)
	be.Read(out, got)
	if err := be.Commit(); err != nil {
		t.Fatal(err)
	}
	res := make([][]float32, rows)
	for i := range res {
		res[i] = got[i*qd : (i+1)*qd]
	}
	return res
}

// windowReference is sliding-window attention in float64 over the f16
// rounding of q, k and v: row p's output.
func windowReference(a infer.Attn, qkv [3][]float32, p int) []float64 {
	group, dim := a.Heads/a.KVHeads, a.HeadDim
	kvd := a.KVHeads * dim
	r16 := func(x float32) float64 { return float64(quant.RoundF16(x)) }
	out := make([]float64, a.Heads*dim)
	for h := range a.Heads {
		g := h / group
		first := 0 // llama.cpp masks t where p − t ≥ window
		if a.Window > 0 {
			first = max(0, p-a.Window+1)
		}
		s := make([]float64, p+1-first)
		m := math.Inf(-1)
		for t := first; t <= p; t++ {
			var d float64
			for i := range dim {
				d += r16(qkv[0][p*a.Heads*dim+h*dim+i]) * r16(qkv[1][t*kvd+g*dim+i])
			}
			s[t-first] = d * float64(a.Scale)
			m = max(m, s[t-first])
		}
		var sum float64
		for i := range s {
			s[i] = math.Exp(s[i] - m)
			sum += s[i]
		}
		for t := first; t <= p; t++ {
			for i := range dim {
				out[h*dim+i] += s[t-first] / sum * r16(qkv[2][t*kvd+g*dim+i])
			}
		}
	}
	return out
}

// Sliding-window attention, on each cache type, in a prompt pass and in
// a decode step (both decode paths): the output is attention over the
// window's positions (against a float64 reference; a window of one is
// the f16 value row itself), the positions before the window weigh
// nothing (spoiling them leaves the output to the bit), and the window
// matters (the output without it differs).
func TestAttentionWindow(t *testing.T) {
	kvTypes := []infer.KVTypes{{}, {K: infer.KVQ8_0, V: infer.KVQ8_0}, {K: infer.KVQ8_0}}
	for _, tc := range []struct {
		heads, kvHeads, dim, window, n, from int
		sweeps                               int // forceDecodeSweeps
	}{
		{4, 2, 64, 1, 40, 0, 0},
		{4, 2, 64, 3, 40, 0, 0},
		{4, 1, 64, 64, 200, 0, 0},
		{4, 1, 64, 100, 300, 0, 0},
		{2, 1, 64, 3, 300, 299, -1},
		{2, 1, 64, 70, 700, 699, -1},
		{2, 1, 64, 70, 700, 699, 1},
		{2, 1, 64, 300, 700, 699, 1},
	} {
		for _, kv := range kvTypes {
			name := fmt.Sprintf("%d-%d-w%d-n%d-from%d-sweeps%d-%v-%v", tc.heads, tc.kvHeads, tc.window, tc.n, tc.from, tc.sweeps, kv.K, kv.V)
			t.Run(name, func(t *testing.T) {
				forceDecodeSweeps = tc.sweeps
				defer func() { forceDecodeSweeps = 0 }()
				a := infer.Attn{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.dim, Scale: 0.125, Window: tc.window}
				r := rand.New(rand.NewSource(int64(tc.n + tc.window)))
				var qkv [3][]float32
				for i, cols := range []int{tc.heads, tc.kvHeads, tc.kvHeads} {
					qkv[i] = make([]float32, tc.n*cols*tc.dim)
					for j := range qkv[i] {
						qkv[i][j] = float32(r.NormFloat64())
					}
				}
				got := windowRun(t, kv, a, qkv, tc.n, tc.from, 0, 2)
				// every position before row from+p0's window spoiled
				p0 := max(tc.from, tc.n/2)
				spoilt := windowRun(t, kv, a, qkv, tc.n, tc.from, a.First(p0), 2)
				full := a
				full.Window = 0
				unwindowed := windowRun(t, kv, full, qkv, tc.n, tc.from, 0, 2)
				tol := 2e-3
				if kv.Quantized() {
					tol = 0.08 // Q8_0's step on values near 3
				}
				differs := false
				for i, row := range got {
					p := tc.from + i
					want := windowReference(a, qkv, p)
					for j, v := range row {
						if d := math.Abs(float64(v) - want[j]); !(d <= tol) {
							t.Fatalf("row %d (position %d) output %d: %v, reference %v", i, p, j, v, want[j])
						}
						if tc.window == 1 && !kv.Quantized() && float64(v) != want[j] {
							t.Fatalf("row %d output %d: %v, want the value %v", i, j, v, want[j])
						}
						if p >= p0 && spoilt[i][j] != v {
							t.Fatalf("row %d (position %d) output %d: %v with the positions before %d spoiled, %v without", i, p, j, spoilt[i][j], a.First(p0), v)
						}
						differs = differs || unwindowed[i][j] != v
					}
				}
				if !differs {
					t.Fatal("the output is the same without the window")
				}
			})
		}
	}
}
