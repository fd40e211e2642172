package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

func load(t *testing.T, cfg tinymodel.Config, opts infer.Options) *infer.Model {
	t.Helper()
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Backend = "cpu"
	m, err := infer.Load(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// reference is a plain float64 Qwen3 written from the equations, sharing no
// code with the backend, with llama.cpp's f16 roundings of q, K, V and the
// attention weights.
type reference struct {
	f  *gguf.File
	hp infer.Hyperparams
	k  [][][]float64 // layer, position, kv width
	v  [][][]float64
}

func (r *reference) mat(t *testing.T, name string) (rows [][]float64) {
	ti, ok := r.f.Tensor(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	cols, n := int(ti.Shape[0]), int(ti.Rows())
	rb := int(ti.RowBytes())
	data := r.f.Data(ti)
	buf := make([]float32, cols)
	for i := range n {
		if err := quant.DequantizeRow(ti.Type, data[i*rb:(i+1)*rb], buf); err != nil {
			t.Fatal(err)
		}
		row := make([]float64, cols)
		for j, x := range buf {
			row[j] = float64(x)
		}
		rows = append(rows, row)
	}
	return rows
}

func (r *reference) vec(t *testing.T, name string) []float64 { return r.mat(t, name)[0] }

func matvec(w [][]float64, x []float64) []float64 {
	y := make([]float64, len(w))
	for i, row := range w {
		for j, a := range row {
			y[i] += a * x[j]
		}
	}
	return y
}

func rms(x, w []float64, eps float64) []float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	scale := 1 / math.Sqrt(s/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * scale * w[i]
	}
	return y
}

func f16(x float64) float64 { return float64(quant.F16ToF32(quant.F32ToF16(float32(x)))) }

// step runs one token at position pos and returns the logits.
func (r *reference) step(t *testing.T, tok int32, pos int) []float64 {
	hp := r.hp
	D, H, KV := hp.HeadDim, hp.Heads, hp.KVHeads
	x := append([]float64(nil), r.mat(t, "token_embd.weight")[tok]...)
	for l := range hp.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		h := rms(x, r.vec(t, p+"attn_norm.weight"), float64(hp.RMSEps))
		q := matvec(r.mat(t, p+"attn_q.weight"), h)
		k := matvec(r.mat(t, p+"attn_k.weight"), h)
		v := matvec(r.mat(t, p+"attn_v.weight"), h)
		qn, kn := r.vec(t, p+"attn_q_norm.weight"), r.vec(t, p+"attn_k_norm.weight")
		rope := func(head []float64) {
			for j := range D / 2 {
				th := float64(pos) * math.Pow(float64(hp.Rope.Base), -2*float64(j)/float64(D))
				a, b := head[j], head[j+D/2]
				head[j], head[j+D/2] = a*math.Cos(th)-b*math.Sin(th), a*math.Sin(th)+b*math.Cos(th)
			}
		}
		for i := 0; i < len(q); i += D {
			copy(q[i:i+D], rms(q[i:i+D], qn, float64(hp.RMSEps)))
			rope(q[i : i+D])
		}
		for i := 0; i < len(k); i += D {
			copy(k[i:i+D], rms(k[i:i+D], kn, float64(hp.RMSEps)))
			rope(k[i : i+D])
		}
		for i := range k {
			k[i], v[i] = f16(k[i]), f16(v[i])
		}
		r.k[l] = append(r.k[l][:pos], k)
		r.v[l] = append(r.v[l][:pos], v)
		att := make([]float64, len(q))
		for hh := range H {
			g := hh / (H / KV)
			s := make([]float64, pos+1)
			best := math.Inf(-1)
			for tt := range s {
				for d := range D {
					s[tt] += f16(q[hh*D+d]) * r.k[l][tt][g*D+d]
				}
				s[tt] /= math.Sqrt(float64(D))
				best = max(best, s[tt])
			}
			var sum float64
			for tt := range s {
				s[tt] = math.Exp(s[tt] - best)
				sum += s[tt]
			}
			for tt := range s {
				w := f16(s[tt] / sum)
				for d := range D {
					att[hh*D+d] += w * r.v[l][tt][g*D+d]
				}
			}
		}
		o := matvec(r.mat(t, p+"attn_output.weight"), att)
		for i := range x {
			x[i] += o[i]
		}
		h = rms(x, r.vec(t, p+"ffn_norm.weight"), float64(hp.RMSEps))
		gate, up := matvec(r.mat(t, p+"ffn_gate.weight"), h), matvec(r.mat(t, p+"ffn_up.weight"), h)
		for i := range gate {
			gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
		}
		down := matvec(r.mat(t, p+"ffn_down.weight"), gate)
		for i := range x {
			x[i] += down[i]
		}
	}
	out := "output.weight"
	if hp.TiedOutput {
		out = "token_embd.weight"
	}
	return matvec(r.mat(t, out), rms(x, r.vec(t, "output_norm.weight"), float64(hp.RMSEps)))
}

func TestForwardMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tinymodel.Config
	}{
		{"f32 tied", tinymodel.Small(gguf.F32)},
		{"f32 separate output", func() tinymodel.Config { c := tinymodel.Small(gguf.F32); c.Tied = false; c.Seed = 2; return c }()},
		{"f32 no gqa", func() tinymodel.Config { c := tinymodel.Small(gguf.F32); c.KVHeads = c.Heads; return c }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, tc.cfg, infer.Options{Context: 64, Threads: 2})
			ref := &reference{f: m.File, hp: m.Hparams,
				k: make([][][]float64, m.Hparams.Layers), v: make([][][]float64, m.Hparams.Layers)}
			tokens := []int32{5, 17, 3, 90, 42, 42, 7}
			// Prefill all but the last token in one batch, then decode one.
			if err := m.Forward(tokens[:6], 0); err != nil {
				t.Fatal(err)
			}
			var want []float64
			for i, tok := range tokens[:6] {
				want = ref.step(t, tok, i)
			}
			assertClose(t, "prefill", m.Logits(), want)
			if err := m.Forward(tokens[6:], 6); err != nil {
				t.Fatal(err)
			}
			assertClose(t, "decode", m.Logits(), ref.step(t, tokens[6], 6))
		})
	}
}

func assertClose(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	var worst, scale float64
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i])-want[i]))
		scale = max(scale, math.Abs(want[i]))
	}
	// f32 versus f64 arithmetic, where a value near an f16 rounding
	// boundary of K, V or the attention weights rounds differently, moves
	// logits by up to ~2.5e-4 of their scale; a real mistake (a 1% attention
	// scale) moves them by 5e-3.
	if worst > 1e-3*scale {
		t.Errorf("%s: logits (up to %g) differ from the reference by up to %g", what, scale, worst)
	}
}

// Batching must not change results: every row is computed on its own.
func TestPrefillEqualsTokenByToken(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_0, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := tinymodel.Small(typ)
			// 40 tokens in passes of 32 and 8 against single tokens from
			// the cache: tinyBLAS's order for a pass of several rows,
			// ggml_vec_dot_f16's for one, over the same cached K and V.
			var tokens []int32
			for i := range int32(40) {
				tokens = append(tokens, 1+i%23)
			}
			batched := load(t, cfg, infer.Options{Context: 64, Batch: 32})
			if err := batched.Forward(tokens, 0); err != nil {
				t.Fatal(err)
			}
			single := load(t, cfg, infer.Options{Context: 64, Batch: 1})
			for i, tok := range tokens {
				if err := single.Forward([]int32{tok}, i); err != nil {
					t.Fatal(err)
				}
			}
			for i, g := range batched.Logits() {
				if w := single.Logits()[i]; g != w {
					t.Fatalf("logit %d: batched %v, one by one %v", i, g, w)
				}
			}
		})
	}
}

func TestForwardErrors(t *testing.T) {
	m := load(t, tinymodel.Small(gguf.Q8_0), infer.Options{Context: 8})
	tests := []struct {
		name   string
		tokens []int32
		pos    int
		want   error
	}{
		{"past the context", []int32{1, 2, 3}, 6, infer.ErrContextFull},
		{"negative position", []int32{1}, -1, infer.ErrContextFull},
		{"token outside vocab", []int32{96}, 0, infer.ErrBadShape},
		{"negative token", []int32{-1}, 0, infer.ErrBadShape},
		{"no tokens", nil, 0, infer.ErrBadShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.Forward(tc.tokens, tc.pos); !errors.Is(err, tc.want) {
				t.Fatalf("Forward = %v, want %v", err, tc.want)
			}
		})
	}
	// The model stays usable after errors.
	if err := m.Forward([]int32{1, 2}, 0); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	m := load(t, tinymodel.Small(gguf.Q1_0), infer.Options{Context: 256, Threads: 2})
	if err := m.Forward([]int32{1, 2, 3}, 0); err != nil {
		t.Fatal(err)
	}
	pos := 3
	tok := []int32{4}
	allocs := testing.AllocsPerRun(20, func() {
		if err := m.Forward(tok, pos); err != nil {
			t.Fatal(err)
		}
		pos++
	})
	if allocs != 0 {
		t.Errorf("a decode step allocates %v times", allocs)
	}
}

// A model loaded from a mapped file (whose repacked weights' pages the
// backend releases) computes what the same model in memory computes.
func TestMappedFileMatchesMemory(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q1_0)
	data, err := tinymodel.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mapped, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	inMemory, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	var logits [2][]float32
	for i, f := range []*gguf.File{mapped, inMemory} {
		m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 16})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Forward(tokens, 0); err != nil {
			t.Fatal(err)
		}
		logits[i] = append([]float32(nil), m.Logits()...)
		if mem := m.Backend().Memory(); mem.Weights == 0 {
			t.Errorf("backend reports no weight bytes: %+v", mem)
		}
		m.Close()
	}
	for i := range logits[0] {
		if logits[0][i] != logits[1][i] {
			t.Fatalf("logit %d: mapped %v, in memory %v", i, logits[0][i], logits[1][i])
		}
	}
}
