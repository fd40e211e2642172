package gpu

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// TestRoundedRowsMatchUnfused decodes with every rounded row's producer
// also writing its lookup table, which q1_xq reads, against the unfused
// passes (x as it is, rounded in each matvec's workgroups): a Q8_0
// block's partial sums are exact in f32, so the logits agree to f32
// rounding (1e-6 of the largest). The models take every producer of a
// rounded row: rmsnorm's Q8 path (256 wide) and act_q8's (512),
// attention's epilogue, gate/up's SwiGLU epilogue, and qwen35's DeltaNet
// output gate (act_q8's SwiGLU).
func TestRoundedRowsMatchUnfused(t *testing.T) {
	wide := tinymodel.Small(gguf.Q1_0)
	wide.Embed, wide.FFN, wide.Heads, wide.KVHeads = 512, 1024, 8, 4
	for _, c := range []struct {
		name string
		open func(t *testing.T) *gguf.File
	}{
		{"qwen3-256", openTiny(tinymodel.Small(gguf.Q1_0))},
		{"qwen3-512", openTiny(wide)},
		{"qwen35", func(t *testing.T) *gguf.File { return OpenQwen35Tiny(t, gguf.Q1_0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			load := func(unfused bool) (*infer.Model, *Backend) {
				m, err := infer.Load(c.open(t), infer.Options{Backend: "gpu", Batch: 64, Context: 256,
					GPU: infer.GPUOptions{AllowSoftware: true}})
				if err != nil {
					if errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
						t.Skipf("no GPU adapter: %v", err)
					}
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Close() })
				b := m.Backend().(*Backend)
				// the split attention passes on both sides: attn_lat sums
				// in another order (TestAttnLatMatchesUnfused)
				b.noFuse, b.latMax = unfused, 0
				return m, b
			}
			plain, _ := load(true)
			tab, tb := load(false)
			toks, pos := []int32{1, 5, 9, 13, 17, 21, 25, 29}, 0
			for step := 0; step < 10; step++ {
				for _, m := range []*infer.Model{plain, tab} {
					if err := m.Forward(toks, pos); err != nil {
						t.Fatal(err)
					}
				}
				want, got := plain.Logits(), tab.Logits()
				maxDiff, maxAbs := MaxDiff(want, got)
				if maxDiff > 1e-6*maxAbs {
					t.Fatalf("step %d (%d tokens): logits differ by %.3g (largest %.3g)", step, len(toks), maxDiff, maxAbs)
				}
				pos += len(toks)
				toks = []int32{ArgmaxOf(want)}
			}
			xq := 0
			for key := range tb.d.kernels {
				if strings.HasPrefix(key, "q1_xq ") {
					xq++
				}
			}
			if xq == 0 {
				t.Error("no q1_xq pipeline")
			}
		})
	}
}

// MaxDiff is the largest difference between got and want, and want's
// largest magnitude; the tests of package gpu_test use it too.
func MaxDiff(want, got []float32) (diff, largest float64) {
	for i := range want {
		largest = math.Max(largest, math.Abs(float64(want[i])))
		diff = math.Max(diff, math.Abs(float64(got[i]-want[i])))
	}
	return diff, largest
}

// ArgmaxOf is the index of v's largest value (the first of equals); the
// tests of package gpu_test use it too.
func ArgmaxOf(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

func openTiny(cfg tinymodel.Config) func(t *testing.T) *gguf.File {
	return func(t *testing.T) *gguf.File {
		t.Helper()
		f, err := tinymodel.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
}

// OpenQwen35Tiny writes synth's tiny hybrid model in typ, vocab cut to
// 1024, and opens it; the tests of package gpu_test use it too.
func OpenQwen35Tiny(t *testing.T, typ gguf.Type) *gguf.File {
	t.Helper()
	s, err := synth.ArchShape("qwen35", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 1024
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: typ, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
