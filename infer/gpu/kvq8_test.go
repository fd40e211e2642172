package gpu_test

import (
	"errors"
	"os"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// loadKV loads f on backend with a KV cache of types kv.
func loadKV(t *testing.T, backend string, f *gguf.File, kv infer.KVTypes) *infer.Model {
	t.Helper()
	m, err := infer.Load(f, infer.Options{Backend: backend, Batch: 64, Context: 256, KV: kv, GPU: softwareOK})
	if err != nil {
		if backend == "gpu" && errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// A Q8_0 K or V cache decodes on the GPU as on the CPU with the same cache
// types: the prompt pass (the tile kernels), decode on each attention path
// (attn_lat; or over one split, attn_one, and over several, attn_qk and the
// split passes), and on qwen35 its gated attention layers between the
// recurrent ones. The CPU follows llama.cpp's
// flash attention over a quantized cache (Walsh–Hadamard rotation, the
// query quantized to Q8_0 for a Q8_0 K, f32 softmax weights for a Q8_0 V);
// the GPU does the same arithmetic in other summation orders, so, as
// TestGreedyMatchesCPU explains, a value may now and then round across a
// boundary: logits must agree within 3e-2 of the largest (6e-2 for qwen35,
// whose recurrent state carries such a shift, TestQwen35GreedyMatchesCPU),
// tokens wherever the CPU's top two are further apart than twice that.
func TestQ8KVMatchesCPU(t *testing.T) {
	q8 := infer.KVQ8_0
	for _, kv := range []infer.KVTypes{{K: q8}, {V: q8}, {K: q8, V: q8}} {
		for _, path := range gpu.AttnPaths {
			t.Run("qwen3/"+path+"/"+kv.String(), func(t *testing.T) {
				f, err := tinymodel.Open(tinymodel.Small(gguf.Q8_0))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				cpu, gpuM := loadKV(t, "cpu", f, kv), loadKV(t, "gpu", f, kv)
				gpu.UseAttnPath(gpuM.Backend().(*gpu.Backend), path)
				decodeBoth(t, cpu, gpuM, []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}, 30, 3e-2)
			})
		}
		t.Run("qwen35/"+kv.String(), func(t *testing.T) {
			f := gpu.OpenQwen35Tiny(t, gguf.Q8_0)
			cpu, gpuM := loadKV(t, "cpu", f, kv), loadKV(t, "gpu", f, kv)
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(1 + 7*i%1000)
			}
			decodeBoth(t, cpu, gpuM, prompt, 12, 6e-2)
		})
	}
}
