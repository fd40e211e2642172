package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// TestLookupTablesMatchXQ decodes with MatVec "auto" (every rounded row's
// producer also writes its lookup table, q1_xq reads that) and with "xq"
// (q1_xq's tested adds), requiring the same logits bit for bit: a Q8_0
// block's partial sums are exact in f32, so the two orders must agree.
// The models take every producer of a rounded row: rmsnorm's Q8 path
// (256 wide) and act_q8's (512), attention's epilogue, gate/up's SwiGLU
// epilogue, and qwen35's DeltaNet output gate (act_q8's SwiGLU).
func TestLookupTablesMatchXQ(t *testing.T) {
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
			load := func(matvec string) (*infer.Model, *Backend) {
				m, err := infer.Load(c.open(t), infer.Options{Backend: "gpu", Batch: 64, Context: 256,
					GPU: infer.GPUOptions{AllowSoftware: true, MatVec: matvec}})
				if err != nil {
					if errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
						t.Skipf("no GPU adapter: %v", err)
					}
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Close() })
				return m, m.Backend().(*Backend)
			}
			xq, _ := load("xq")
			tab, tb := load("auto")
			toks, pos := []int32{1, 5, 9, 13, 17, 21, 25, 29}, 0
			for step := 0; step < 10; step++ {
				for _, m := range []*infer.Model{xq, tab} {
					if err := m.Forward(toks, pos); err != nil {
						t.Fatal(err)
					}
				}
				want, got := xq.Logits(), tab.Logits()
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("step %d (%d tokens): logit %d is %g with tables, %g without", step, len(toks), i, got[i], want[i])
					}
				}
				pos += len(toks)
				toks = []int32{ArgmaxOf(want)}
			}
			var with, without int
			for key := range tb.d.kernels {
				if strings.HasPrefix(key, "q1_xq ") {
					if strings.Contains(key, " TAB=1") {
						with++
					} else {
						without++
					}
				}
			}
			if with == 0 || without != 0 {
				t.Errorf("q1_xq pipelines: %d read tables, %d do not", with, without)
			}
		})
	}
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
