package gpu

import (
	"errors"
	"math"
	"os"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// The GPU's hidden states (infer.Model.Hidden, what embeddings pool) are
// the CPU's, within the summation-order tolerance of TestGreedyMatchesCPU,
// in one pass or two.
func TestHiddenMatchesCPU(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *gguf.File
	}{
		{"qwen3", openTiny(tinymodel.Small(gguf.Q1_0))},
		{"qwen35", func(t *testing.T) *gguf.File { return OpenQwen35Tiny(t, gguf.Q1_0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.open(t)
			tokens := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49}
			hidden := func(backend string, parts ...int) []float32 {
				m, err := infer.Load(f, infer.Options{Backend: backend, Batch: 64, Context: 256, GPU: infer.GPUOptions{AllowSoftware: true}})
				if err != nil {
					if backend == "gpu" && errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
						t.Skipf("no GPU adapter: %v", err)
					}
					t.Fatal(err)
				}
				defer m.Close()
				E := m.Hparams.Embed
				out := make([]float32, len(tokens)*E)
				pos := 0
				for _, n := range parts {
					if err := m.Hidden(tokens[pos:pos+n], pos, 0, 0, out[pos*E:]); err != nil {
						t.Fatal(err)
					}
					pos += n
				}
				return out
			}
			cpu := hidden("cpu", len(tokens))
			scale := 0.0
			for _, v := range cpu {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			for name, got := range map[string][]float32{"one pass": hidden("gpu", len(tokens)), "two passes": hidden("gpu", 6, len(tokens)-6)} {
				worst := 0.0
				for i := range cpu {
					worst = math.Max(worst, math.Abs(float64(got[i]-cpu[i])))
				}
				if worst > 3e-2*scale {
					t.Errorf("%s: the GPU's hidden states differ from the CPU's by %.3g of the largest", name, worst/scale)
				}
			}
		})
	}
}
