package gpu_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/slots"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// loadSynth loads synth's tiny model of arch (vocab cut to 1024; gemma3's
// sliding window cut to 8, so that the tests' prompts outgrow it) in typ
// on backend.
func loadSynth(t *testing.T, arch, backend string, typ gguf.Type) *infer.Model {
	t.Helper()
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 1024
	if s.Window > 0 {
		s.Window = 8
	}
	path := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: typ, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
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

// llama (RoPE on adjacent pairs, Llama 3's frequency factors, GQA),
// qwen2 (q/k/v biases, no q/k norms) and gemma3 (scaled embeddings,
// post-norms, GELU, local layers' own RoPE and window) decode on the GPU as on the CPU: a
// 12-token prompt in one pass, then one token a pass. In F32 nothing is
// rounded between the ops but K, V and attention's f16s: the logits agree
// to ~2e-6 of the largest until a K or V value that the two sides' f32
// sums put on either side of an f16 rounding boundary lands in the cache,
// which moves them by up to 2.1e-4 for the rest of the run (measured on
// these models); they must agree to 1e-3, where rotating NeoX pairs instead
// of adjacent ones is off by 0.9. The rounded types agree within
// TestGreedyMatchesCPU's 3e-2, and so do their greedy tokens wherever the
// CPU's top two are further apart than twice that.
func TestDenseArchsGreedyMatchCPU(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "gemma3"} {
		for _, typ := range []gguf.Type{gguf.F32, gguf.Q8_0, gguf.Q4_K} {
			t.Run(arch+"/"+typ.String(), func(t *testing.T) {
				cpu := loadSynth(t, arch, "cpu", typ)
				gpuM := loadSynth(t, arch, "gpu", typ)
				prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45}
				rel := 3e-2
				if typ == gguf.F32 {
					rel = 1e-3
				}
				decodeBoth(t, cpu, gpuM, prompt, 16, rel)
			})
		}
	}
}

// Chained greedy decoding (the token embedded on the device, argmax read
// back a pass late) gives plain greedy decoding's tokens on these
// architectures too: gemma3's embedding scale and llama's RoPE run in the
// chained passes.
func TestDenseArchsChainedGreedy(t *testing.T) {
	for _, arch := range []string{"llama", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			plain, chained := loadSynth(t, arch, "gpu", gguf.Q8_0), loadSynth(t, arch, "gpu", gguf.Q8_0)
			prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29}
			want, err := slots.Greedy(plain, prompt, 12, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := slots.Greedy(chained, prompt, 12, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("chained greedy tokens\n%v\nwant\n%v", got, want)
			}
		})
	}
}
