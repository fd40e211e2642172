package infer_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// Hidden's rows are the states the output head turns into logits: the
// output matrix times the last row gives Forward's logits, and a row of
// another token does not. Split passes and a sequence at another cache
// region give the same rows.
func TestHiddenIsTheOutputHeadsInput(t *testing.T) {
	for _, c := range verifyModels {
		t.Run(c.arch+"/"+c.typ.String(), func(t *testing.T) {
			m := loadSynth(t, c.arch, c.typ, 1)
			E, V := m.Hparams.Embed, m.Hparams.Vocab
			tokens := ids(23, 1)
			if err := m.Forward(tokens, 0); err != nil {
				t.Fatal(err)
			}
			logits := slices.Clone(m.Logits())

			hidden := make([]float32, len(tokens)*E)
			if err := m.Hidden(tokens, 0, 0, 0, hidden); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.Logits(), logits) {
				t.Error("Hidden changed Logits")
			}
			out, ok := m.File.Tensor("output.weight")
			if !ok {
				out, _ = m.File.Tensor("token_embd.weight")
			}
			data, rb := m.File.Data(out), int(out.RowBytes())
			w := make([]float32, E)
			head := func(h []float32) []float32 {
				l := make([]float32, V)
				for v := range V {
					if err := quant.DequantizeRow(out.Type, data[v*rb:(v+1)*rb], w); err != nil {
						t.Fatal(err)
					}
					var s float64
					for i := range E {
						s += float64(w[i]) * float64(h[i])
					}
					l[v] = float32(s)
				}
				return l
			}
			worst := func(got []float32) float64 {
				scale, d := 0.0, 0.0
				for i := range logits {
					scale = math.Max(scale, math.Abs(float64(logits[i])))
					d = math.Max(d, math.Abs(float64(got[i]-logits[i])))
				}
				return d / scale
			}
			last := hidden[(len(tokens)-1)*E:]
			// The backend's products round activations to 8 bits for
			// quantized weights: measured 0.5-0.6 % of the largest logit
			// (Q1_0, Q4_K, qwen35 Q2_0), 0.03 % for F16.
			d := worst(head(last))
			t.Logf("output·hidden(last) is %.3g of the largest logit from Forward's", d)
			if d > 0.02 {
				t.Errorf("output·hidden(last) is %.3g of the largest logit from Forward's logits", d)
			}
			if d := worst(head(hidden[:E])); d < 0.1 {
				t.Errorf("the first token's hidden state also gives the last logits (%.3g): the check cannot tell rows apart", d)
			}

			// Two passes, the second continuing the first, give the same rows.
			split := make([]float32, len(tokens)*E)
			if err := m.Hidden(tokens[:10], 0, 0, 0, split); err != nil {
				t.Fatal(err)
			}
			if err := m.Hidden(tokens[10:], 10, 0, 0, split[10*E:]); err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(split, hidden); d > 0.02 {
				t.Errorf("split passes differ from one pass by %.3g", d)
			}
			if m.RowsSupported() {
				other := make([]float32, len(tokens)*E)
				if err := m.Hidden(tokens, 0, 100, 0, other); err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(other, hidden); d > 1e-5 {
					t.Errorf("the sequence at cache position 100 differs by %.3g", d)
				}
			} else if err := m.Hidden(tokens, 0, 100, 0, hidden); err == nil {
				t.Error("a sequence at cache position 100 was run without passes over rows")
			}
		})
	}
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func TestHiddenRefusesBadShapes(t *testing.T) {
	m := loadSynth(t, "qwen3", verifyModels[0].typ, 1)
	E := m.Hparams.Embed
	buf := make([]float32, 4*E)
	for name, err := range map[string]error{
		"no tokens":          m.Hidden(nil, 0, 0, 0, buf),
		"short output":       m.Hidden(ids(5, 1), 0, 0, 0, buf),
		"token out of range": m.Hidden([]int32{-1}, 0, 0, 0, buf),
		"past the context":   m.Hidden(ids(2, 1), m.Context()-1, 0, 0, buf),
		"over a pass":        m.Hidden(ids(m.MaxBatch()+1, 1), 0, 0, 0, make([]float32, (m.MaxBatch()+1)*E)),
	} {
		if !errors.Is(err, infer.ErrBadShape) && !errors.Is(err, infer.ErrContextFull) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
