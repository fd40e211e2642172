package infer_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// loadSynth loads the tiny synth shape of arch (the parity models' shapes)
// on the CPU.
func loadSynth(t testing.TB, arch string, typ gguf.Type, seed uint64) *infer.Model {
	t.Helper()
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.gguf", arch, seed))
	if err := synth.Write(path, synth.Options{Shape: s, Type: typ, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: 256, Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var verifyModels = []struct {
	arch string
	typ  gguf.Type
}{
	{"qwen3", gguf.Q1_0},
	{"qwen3", gguf.Q4_K}, // repacked: gemm or gemv by the tokens of a product
	{"qwen3", gguf.F16},  // batched or one-token f16 products
	{"qwen35", gguf.Q2_0},
	{"llama", gguf.Q8_0},
	{"qwen2", gguf.Q8_0},
}

func ids(n int, seed int32) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = (seed*7919 + int32(i)*104729) % 5000
	}
	return out
}

// A verify pass's rows are, bit for bit, the logits that token-by-token
// decoding gives, and rewinding leaves the cache (and a recurrent state) as
// if the rejected tokens had never run: the next logits match those of a
// sequence that only ever held the kept tokens.
func TestVerifyRowsAndRewind(t *testing.T) {
	for _, c := range verifyModels {
		t.Run(c.arch, func(t *testing.T) {
			m := loadSynth(t, c.arch, c.typ, 1)
			V := m.Hparams.Vocab
			prompt, drafted := ids(23, 1), ids(6, 2)

			// Token by token: the reference.
			plain := infer.NewSequence(m)
			if _, err := plain.Prefill(prompt, nil); err != nil {
				t.Fatal(err)
			}
			var want [][]float32
			for _, id := range drafted {
				if err := plain.Append(id); err != nil {
					t.Fatal(err)
				}
				want = append(want, slices.Clone(m.Logits()))
			}

			for _, keep := range []int{0, 1, 3, len(drafted)} {
				seq := infer.NewSequence(m)
				if _, err := seq.Prefill(prompt, nil); err != nil {
					t.Fatal(err)
				}
				rows, err := seq.Verify(drafted)
				if err != nil {
					t.Fatal(err)
				}
				for i := range drafted {
					if !slices.Equal(rows[i*V:(i+1)*V], want[i]) {
						t.Fatalf("verify row %d differs from decoding token by token", i)
					}
				}
				if err := seq.Rewind(len(prompt) + keep); err != nil {
					t.Fatal(err)
				}
				if seq.Len() != len(prompt)+keep || !slices.Equal(seq.Tokens(), slices.Concat(prompt, drafted[:keep])) {
					t.Fatalf("after Rewind the sequence holds %d tokens", seq.Len())
				}
				if m.Recurrent() {
					got := make([]float32, m.RecurrentSpec().Floats())
					if err := m.Backend().ReadRecurrentState(got); err != nil {
						t.Fatal(err)
					}
					ref := infer.NewSequence(m) // plain decoding: the prompt, then token by token
					if _, err := ref.Prefill(prompt, nil); err != nil {
						t.Fatal(err)
					}
					for _, id := range drafted[:keep] {
						if err := ref.Append(id); err != nil {
							t.Fatal(err)
						}
					}
					want := make([]float32, len(got))
					if err := m.Backend().ReadRecurrentState(want); err != nil {
						t.Fatal(err)
					}
					// Rewinding to the mark restores its snapshot: the very
					// bytes. The kept tokens after it run again as one batch,
					// whose matrix products may round differently from one
					// token at a time, as a prompt's prefill does; the
					// logits that follow are compared bit for bit below.
					if keep == 0 && !slices.Equal(got, want) {
						t.Fatalf("rewinding to the mark: the recurrent state is not the snapshot's")
					}
					if d := maxRelDiff(got, want); d > 1e-5 {
						t.Fatalf("keep %d: the recurrent state after rewinding is %.2g off that of the kept tokens", keep, d)
					}
				}
				// The next token sees the kept tokens only, as plain
				// decoding would have run them: the prompt, then one token
				// at a time. (A prefill of the same tokens is not the
				// reference: f16 and repacked products round a pass of
				// several tokens otherwise than one of each.)
				next := int32(4242)
				if err := seq.Append(next); err != nil {
					t.Fatal(err)
				}
				got := slices.Clone(m.Logits())
				ref := infer.NewSequence(m)
				if _, err := ref.Prefill(prompt, nil); err != nil {
					t.Fatal(err)
				}
				for _, id := range append(slices.Clone(drafted[:keep]), next) {
					if err := ref.Append(id); err != nil {
						t.Fatal(err)
					}
				}
				if !slices.Equal(got, m.Logits()) {
					t.Errorf("keep %d: logits after rewinding differ from plain decoding of the kept tokens", keep)
				}
			}
		})
	}
}

// maxRelDiff is max |a−b| over max |b|.
func maxRelDiff(a, b []float32) float64 {
	var d, top float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		top = max(top, math.Abs(float64(b[i])))
	}
	return d / max(top, 1e-30)
}
