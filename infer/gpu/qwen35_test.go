package gpu_test

import (
	"errors"
	"os"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
)

// loadQwen35 loads gpu.OpenQwen35Tiny's model in typ on backend.
func loadQwen35(t *testing.T, backend string, typ gguf.Type) *infer.Model {
	t.Helper()
	f := gpu.OpenQwen35Tiny(t, typ)
	m, err := infer.Load(f, infer.Options{Backend: backend, Batch: 64, Context: 256, GPU: softwareOK})
	if err != nil {
		if backend == "gpu" && errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// The hybrid qwen35 network (Gated DeltaNet layers, fewer K heads than V
// heads, and gated attention) decodes on the GPU as on the CPU. The
// 40-token prompt is one pass long enough for the GPU's chunked delta rule;
// the decode steps use its per-token form and carry the recurrent state
// from pass to pass. In F32 nothing is rounded between the ops, so the
// logits must agree to 1e-4 of the largest (measured: ≤ 3.4e-5): that pins
// every op. Where activations are rounded to a vec-dot type (F16/BF16 and
// the quantized types) a summation-order difference now and then moves a
// value across a rounding boundary, as TestGreedyMatchesCPU explains, and
// the recurrent state carries the shift into every later token: measured up
// to 4.6 % of the largest logit, so those must agree within 6e-2, and their
// greedy tokens wherever the CPU's top two logits are further apart than
// twice that.
func TestQwen35GreedyMatchesCPU(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.F32, gguf.BF16, gguf.Q8_0, gguf.Q4_K, gguf.Q1_0, gguf.Q2_0, gguf.PQ2_0, gguf.PTQ1_0} {
		t.Run(typ.String(), func(t *testing.T) {
			cpu := loadQwen35(t, "cpu", typ)
			gpuM := loadQwen35(t, "gpu", typ)
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(1 + 7*i%1000)
			}
			decodeBoth(t, cpu, gpuM, prompt, 16, tolFor(typ))
		})
	}
}

// tolFor is the agreement TestQwen35GreedyMatchesCPU requires of typ's
// logits, relative to the largest.
func tolFor(typ gguf.Type) float64 {
	if typ == gguf.F32 {
		return 1e-4
	}
	return 6e-2
}
