package gpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// TestEvenSlicesMatchCPU runs q1_xq with MatVec "tabbal" (K's blocks split
// evenly over the slices: 40, 48 and 136 blocks, the 27B's widths) on a
// rounded row against the CPU's product, and checks the shape it took.
func TestEvenSlicesMatchCPU(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	for _, k := range []int{5120, 6144, 17408} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			const m = 64
			b := newTestBackendWith(t, infer.GPUOptions{MatVec: "tabbal"})
			wv, xv := randFloats(r, m*k, 1), randFloats(r, k, 1)
			wb := quantizeMatrix(t, gguf.Q1_0, m, k, wv)
			w, err := b.LoadWeight(infer.WeightData{Name: "blk.0.ffn_down.weight", Type: gguf.Q1_0, Shape: []int64{int64(k), m}, Data: wb})
			if err != nil {
				t.Fatal(err)
			}
			ones := make([]float32, k)
			for i := range ones {
				ones[i] = 1
			}
			norm := b.f32Weight(t, "norm", []int64{int64(k)}, ones)
			x, h, y := b.mustTensor(t, "x", 1, k), b.mustTensor(t, "h", 1, k), b.mustTensor(t, "y", 1, m)
			b.write(t, x, xv)
			got := b.run(t, 1, 0, func() {
				b.RMSNorm(h, x, norm, 1e-6)
				b.MatMul(y, w, h)
			}, h, y)
			if c := b.LastCensus(); c["q1_xq"] != 1 {
				t.Fatalf("census %v: want q1_xq", c)
			}
			nb := k / 128
			var ks int
			for even := 32; even <= 128; even++ {
				if nb%even == 0 {
					ks = even
					break
				}
			}
			found := false
			for key := range b.d.kernels {
				found = found || strings.HasPrefix(key, "q1_xq ") && strings.Contains(key, fmt.Sprintf(" KS=%du ", ks))
			}
			if !found {
				keys := []string{}
				for key := range b.d.kernels {
					keys = append(keys, key)
				}
				t.Errorf("no q1_xq with KS=%d among %q", ks, keys)
			}
			want := refMatMul(gguf.Q1_0, wb, m, k, got[0], 1)
			if e := maxRelErr(got[1], want); e > 1e-5 {
				t.Errorf("max error %.3g of the largest value", e)
			}
		})
	}
}
