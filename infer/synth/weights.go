package synth

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// tensor is one tensor of the plan: where it goes and how its values are
// drawn. Values are mean + std·N(0,1), independently per element.
type tensor struct {
	name  string
	typ   gguf.Type
	shape []int64 // ne0 first
	mean  float64
	std   float64
	// rowSpread gives each row its own scale exp(rowSpread·z), z ~ N(0,1).
	rowSpread float64
	// negExp stores −exp(value) instead (qwen35's ssm_a = −exp(A_log)).
	negExp bool
	// values, if set, are the tensor's values (one row), drawn from nothing
	// (rope_freqs).
	values []float32
	// ternary draws each row as a·{−1, 0, 1} instead, uniformly, with a
	// of the same standard deviation (times the row's scale): the stored
	// weights of a rotated model, which every ternary-capable codec keeps
	// without loss.
	ternary bool
}

func (t tensor) elements() int64 { return t.shape[0] * t.rows() }

func (t tensor) rows() int64 {
	n := int64(1)
	for _, d := range t.shape[1:] {
		n *= d
	}
	return n
}

func (t tensor) bytes() (int64, error) {
	row, err := t.typ.RowBytes(t.shape[0])
	if err != nil {
		return 0, fmt.Errorf("synth: tensor %s %v: %w", t.name, t.shape, err)
	}
	return row * t.rows(), nil
}

// outputRowSpread is the default spread of the output rows' log-scales.
const outputRowSpread = 0.3

// chunkRows is how many rows share one random stream. It depends only on the
// row length, so a tensor's values do not depend on how many goroutines
// generate it.
func chunkRows(ne0 int64) int64 { return max(1, (1<<16)/ne0) }

// ternaryChunkRows is chunkRows for ternary tensors: chunks of 2²² values,
// so that a test-sized tensor is one stream (as rotated models were drawn
// before their tensors were chunked, which keeps their goldens) while a
// 27B-shaped one still spreads over the cores.
func ternaryChunkRows(ne0 int64) int64 { return max(1, (1<<22)/ne0) }

func (t tensor) chunkRows() int64 {
	if t.ternary {
		return ternaryChunkRows(t.shape[0])
	}
	return chunkRows(t.shape[0])
}

// stream returns the random source for one chunk of one tensor.
func stream(seed uint64, name string, chunk int64) *rand.Rand {
	h := fnv.New64a()
	io.WriteString(h, name)
	return rand.New(rand.NewPCG(seed^h.Sum64(), uint64(chunk)))
}

// writeTensor draws t's values chunk by chunk, quantizes each row to t.typ
// and writes the rows in order. Chunks are computed in parallel, a batch of
// them at a time, so memory stays at a few chunks whatever the tensor's size.
func writeTensor(w io.Writer, t tensor, seed uint64) error {
	ne0 := t.shape[0]
	rowBytes, err := t.typ.RowBytes(ne0)
	if err != nil {
		return fmt.Errorf("synth: tensor %s: %w", t.name, err)
	}
	per := t.chunkRows()
	rows := t.rows()
	chunks := (rows + per - 1) / per
	workers := int64(runtime.GOMAXPROCS(0))
	bufs := make([][]byte, workers)
	for i := range bufs {
		bufs[i] = make([]byte, per*rowBytes)
	}
	errs := make([]error, workers)
	for first := int64(0); first < chunks; first += workers {
		var wg sync.WaitGroup
		n := min(workers, chunks-first)
		for k := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := first + k
				nrows := min(per, rows-c*per)
				errs[k] = fillChunk(bufs[k][:nrows*rowBytes], t, seed, c, int(ne0), int(rowBytes))
			}()
		}
		wg.Wait()
		for k := range n {
			if errs[k] != nil {
				return errs[k]
			}
			c := first + k
			nrows := min(per, rows-c*per)
			if _, err := w.Write(bufs[k][:nrows*rowBytes]); err != nil {
				return fmt.Errorf("synth: writing %s: %w", t.name, err)
			}
		}
	}
	return nil
}

func fillChunk(dst []byte, t tensor, seed uint64, chunk int64, ne0, rowBytes int) error {
	rng := stream(seed, t.name, chunk)
	row := make([]float32, ne0)
	for off := 0; off < len(dst); off += rowBytes {
		if t.values != nil {
			copy(row, t.values)
			if err := quant.QuantizeRow(t.typ, row, dst[off:off+rowBytes]); err != nil {
				return fmt.Errorf("synth: quantizing %s to %s: %w", t.name, t.typ, err)
			}
			continue
		}
		if t.ternary {
			ternaryRow(row, t, rng)
			if err := quant.QuantizeRow(t.typ, row, dst[off:off+rowBytes]); err != nil {
				return fmt.Errorf("synth: quantizing %s to %s: %w", t.name, t.typ, err)
			}
			continue
		}
		std := t.std
		if t.rowSpread != 0 {
			std *= math.Exp(t.rowSpread * rng.NormFloat64())
		}
		for i := range row {
			v := t.mean + std*rng.NormFloat64()
			if t.negExp {
				v = -math.Exp(v)
			}
			row[i] = float32(v)
		}
		if err := quant.QuantizeRow(t.typ, row, dst[off:off+rowBytes]); err != nil {
			return fmt.Errorf("synth: quantizing %s to %s: %w", t.name, t.typ, err)
		}
	}
	return nil
}

// ternaryRow draws one row of a ternary tensor: a·{−1, 0, 1}, where
// {−a, 0, a} has standard deviation a·√(2/3) = t.std.
func ternaryRow(row []float32, t tensor, rng *rand.Rand) {
	a := t.std / math.Sqrt(2.0/3)
	if t.rowSpread != 0 {
		a *= math.Exp(t.rowSpread * rng.NormFloat64())
	}
	for i := range row {
		row[i] = float32(a * float64(rng.IntN(3)-1))
	}
}

// plan lists a model's tensors in llama.cpp's order, with the value scales
// that make it decisive (see Options.LogitStd).
func plan(s Shape, typ gguf.Type, logitStd float64) []tensor {
	h, q, kv, f, v := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.FFN), int64(s.Vocab)
	hd := int64(s.HeadDim)
	weight := func(name string, in, out int64, std float64) tensor {
		return tensor{name: name, typ: typ, shape: []int64{in, out}, std: std}
	}

	// The logits are <output_norm ⊙ rms(x), output row>. Two choices make
	// the greedy choice clear-cut rather than a near tie that rounding could
	// flip:
	//   - Output rows get scales exp(σ·z), z ~ N(0,1), σ = RowSpread (0.3
	//     unless the shape says otherwise): the logits become
	//     heavy-tailed, which widens the gap between the best two several
	//     times over plain Gaussian rows (measured with llama.cpp: median
	//     top-1/top-2 gap ~8% of the top logit instead of ~2%).
	//   - The output norm's mean g sets the logits' spread to logitStd.
	// Embedding rows are small (RMS 0.25/√hidden) next to what each layer
	// adds (RMS ~2), so the residual stream is the layers' work: with tied
	// embeddings a large embedding makes every token predict itself, as its
	// own row scores |e|²/rms(x) against ~|e| for the others.
	embStd := 0.25 * inv(h)
	outStd := embStd
	if !s.Tied {
		outStd = inv(h)
	}
	g := logitStd / (outStd * math.Sqrt(float64(h)))

	emb := weight("token_embd.weight", h, v, embStd)
	out := weight("output.weight", h, v, outStd)
	spread := s.RowSpread
	if spread == 0 {
		spread = outputRowSpread
	}
	if s.Tied {
		emb.rowSpread = spread
	} else {
		out.rowSpread = spread
	}
	ts := []tensor{emb}
	if !s.Tied {
		ts = append(ts, out)
	}
	ts = append(ts, norm("output_norm.weight", h, g))
	if s.Llama3 != nil {
		ts = append(ts, tensor{name: "rope_freqs.weight", typ: gguf.F32, shape: []int64{hd / 2}, values: s.Llama3.factors(s.HeadDim, s.RopeTheta)})
	}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts, norm(p+"attn_norm.weight", h, 1))
		switch {
		case !s.hybrid():
			ts = append(ts, weight(p+"attn_q.weight", h, q, inv(h)))
		case s.attention(i):
			// q and its sigmoid gate, interleaved per head.
			ts = append(ts, weight(p+"attn_q.weight", h, 2*q, inv(h)))
		default:
			ts = append(ts, deltaNet(p, s, typ)...)
		}
		if s.attention(i) {
			ts = append(ts,
				weight(p+"attn_k.weight", h, kv, inv(h)),
				weight(p+"attn_v.weight", h, kv, inv(h)),
			)
			if s.arch() == "qwen2" {
				// Biases about half the projections' spread (each
				// projection's values are ~N(0, 1)).
				ts = append(ts, bias(p+"attn_q.bias", q), bias(p+"attn_k.bias", kv), bias(p+"attn_v.bias", kv))
			}
			if s.qkNorm() {
				ts = append(ts, norm(p+"attn_q_norm.weight", hd, 1), norm(p+"attn_k_norm.weight", hd, 1))
			}
			ts = append(ts, weight(p+"attn_output.weight", q, h, 2*inv(q)))
			if s.arch() == "gemma3" {
				ts = append(ts, norm(p+"post_attention_norm.weight", h, 1))
			}
		}
		ffnNorm := "ffn_norm.weight"
		if s.hybrid() {
			ffnNorm = "post_attention_norm.weight"
		}
		ts = append(ts,
			norm(p+ffnNorm, h, 1),
			weight(p+"ffn_gate.weight", h, f, inv(h)),
			weight(p+"ffn_up.weight", h, f, inv(h)),
			weight(p+"ffn_down.weight", f, h, 4*inv(f)),
		)
		if s.arch() == "gemma3" {
			ts = append(ts, norm(p+"post_ffw_norm.weight", h, 1))
		}
	}
	return ts
}

func inv(n int64) float64 { return 1 / math.Sqrt(float64(n)) }

func bias(name string, n int64) tensor {
	return tensor{name: name, typ: gguf.F32, shape: []int64{n}, std: 0.5}
}

func norm(name string, n int64, mean float64) tensor {
	return tensor{name: name, typ: gguf.F32, shape: []int64{n}, mean: mean, std: 0.1 * mean}
}

// deltaNet lists the tensors of a Gated DeltaNet layer (its mixer; the
// norms and FFN are the block's). The projections are in the model's type
// but the gates' small projections, which real files keep in BF16 (F32 in
// an F32 model); the conv kernel, decay and norm are F32. The decay
// g = softplus(W_α·x + dt_bias)·ssm_a is near −0.1 (dt_bias ≈ −3, |ssm_a|
// ≈ 4, as trained models have), so the state remembers tens of tokens.
func deltaNet(p string, s Shape, typ gguf.Type) []tensor {
	hy := s.Hybrid
	h := int64(s.Hidden)
	kd, vd := int64(hy.KHeads*hy.StateSize), int64(hy.VHeads*hy.StateSize)
	vh, taps := int64(hy.VHeads), int64(hy.ConvKernel)
	gateType := gguf.BF16
	if typ == gguf.F32 {
		gateType = gguf.F32
	}
	f32 := func(name string, shape []int64, mean, std float64) tensor {
		return tensor{name: name, typ: gguf.F32, shape: shape, mean: mean, std: std}
	}
	return []tensor{
		{name: p + "attn_qkv.weight", typ: typ, shape: []int64{h, 2*kd + vd}, std: inv(h)},
		{name: p + "attn_gate.weight", typ: typ, shape: []int64{h, vd}, std: inv(h)},
		f32(p+"ssm_conv1d.weight", []int64{taps, 2*kd + vd}, 0, inv(taps)),
		f32(p+"ssm_dt.bias", []int64{vh}, -3, 0.5),
		{name: p + "ssm_a", typ: gguf.F32, shape: []int64{vh}, mean: math.Log(4), std: 0.3, negExp: true},
		{name: p + "ssm_beta.weight", typ: gateType, shape: []int64{h, vh}, std: inv(h)},
		{name: p + "ssm_alpha.weight", typ: gateType, shape: []int64{h, vh}, std: inv(h)},
		norm(p+"ssm_norm.weight", int64(hy.StateSize), 1),
		{name: p + "ssm_out.weight", typ: typ, shape: []int64{vd, h}, std: 2 * inv(vd)},
	}
}
