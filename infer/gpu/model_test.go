package gpu_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/slots"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

// softwareOK admits software adapters (lavapipe): CI has no GPU.
var softwareOK = infer.GPUOptions{AllowSoftware: true}

func loadOn(t *testing.T, backend string, cfg tinymodel.Config) *infer.Model {
	t.Helper()
	return loadWith(t, backend, cfg, 64, softwareOK)
}

// loadBatch loads cfg with passes of up to batch prompt tokens.
func loadBatch(t *testing.T, backend string, cfg tinymodel.Config, batch int) *infer.Model {
	t.Helper()
	return loadWith(t, backend, cfg, batch, softwareOK)
}

// loadWith loads cfg with the GPU options o.
func loadWith(t *testing.T, backend string, cfg tinymodel.Config, batch int, o infer.GPUOptions) *infer.Model {
	t.Helper()
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := infer.Load(f, infer.Options{Backend: backend, Batch: batch, GPU: o})
	if err != nil {
		if backend == "gpu" && errors.Is(err, gpu.ErrNoAdapter) && os.Getenv("CI") != "true" {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestGreedyMatchesCPU decodes greedily on both backends from the same
// prompt. The GPU mirrors the CPU's numerics (activations quantized to the
// vec-dot type, q and softmax weights rounded to f16), so logits usually
// agree to ~1e-6 of the largest (TestOneLayerLogitsMatchCPU); what is left
// is summation order, which now and then moves a value across a
// quantization boundary: that shifts the logits by up to ~1.5 % here, and
// the K/V cache keeps the shift for later tokens. So logits must agree
// within 3e-2 of the largest, and tokens whenever the CPU's top two logits
// are further apart than that.
func TestGreedyMatchesCPU(t *testing.T) {
	types := []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q4_0, gguf.Q8_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.F16, gguf.BF16, gguf.F32}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := tinymodel.Small(typ)
			if typ == gguf.Q1_0 {
				cfg.Tied = false
				cfg.Yarn, cfg.YarnOrigCtx = 4, 128
			}
			cpu := loadOn(t, "cpu", cfg)
			gpuM := loadOn(t, "gpu", cfg)
			decodeBoth(t, cpu, gpuM, []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}, 24, 3e-2)
		})
	}
}

// TestAttnPathsMatchCPU decodes greedily on each decode attention path
// (gpu.AttnPaths) against the CPU, past 32 positions, where the split
// path goes from one split (attn_one) to several; tolerances as
// TestGreedyMatchesCPU. TestAttnQKMatchesUnfused and
// TestAttnLatMatchesUnfused pin the paths to the unfused ops.
func TestAttnPathsMatchCPU(t *testing.T) {
	for _, path := range gpu.AttnPaths {
		t.Run(path, func(t *testing.T) {
			cfg := tinymodel.Small(gguf.Q1_0)
			cfg.Tied = false
			cpu := loadOn(t, "cpu", cfg)
			gpuM := loadWith(t, "gpu", cfg, 64, softwareOK)
			gpu.UseAttnPath(gpuM.Backend().(*gpu.Backend), path)
			decodeBoth(t, cpu, gpuM, []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}, 30, 3e-2)
		})
	}
}

// TestGreedyChainedMatchesGreedy decodes greedily with the host off the
// critical path (slots.Greedy chained: argmax and the next token's
// embedding on the GPU, the token read back one pass late) and as Greedy
// does (logits read back, argmax on the host), on each decode attention
// path: the tokens must be the same, and the chained path must have run
// (its passes read no logits back, so Logits stays the prompt's).
func TestGreedyChainedMatchesGreedy(t *testing.T) {
	for _, path := range gpu.AttnPaths {
		t.Run(path, func(t *testing.T) {
			cfg := tinymodel.Small(gguf.Q1_0)
			cfg.Tied = false
			plain, chained := loadWith(t, "gpu", cfg, 64, softwareOK), loadWith(t, "gpu", cfg, 64, softwareOK)
			gpu.UseAttnPath(plain.Backend().(*gpu.Backend), path)
			gpu.UseAttnPath(chained.Backend().(*gpu.Backend), path)
			prompt := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}
			want, err := slots.Greedy(plain, prompt, 40, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := slots.Greedy(chained, prompt, 40, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("chained greedy tokens\n%v\nwant\n%v", got, want)
			}
			// Greedy's Logits would be the last step's, which argmax to
			// the last token
			if want[len(want)-1] == want[0] {
				t.Fatalf("continuation %v ends on its first token: the fallback check cannot tell", want)
			}
			if gpu.ArgmaxOf(chained.Logits()) != want[0] {
				t.Errorf("logits after chained decoding are not the prompt's (argmax %d, want %d)", gpu.ArgmaxOf(chained.Logits()), want[0])
			}
		})
	}
}

// TestOneLayerLogitsMatchCPU pins the tight agreement on one-layer models:
// prefill and one decode step within 2e-4 of the largest logit (a softmax
// weight may still round to the neighbouring f16, ~1e-4 here; 1e-3 for
// F16, whose activations are rounded to f16 as well). Where the GPU's
// summation order moves one activation across a rounding boundary the
// logits move by ~1 % (TestGreedyMatchesCPU): over seeds 1–8 of four types
// that happened once on the H200 (Q4_K seed 1's prefill, 1.2e-2; the other
// 63 comparisons 5e-8 … 4.4e-7) and once on lavapipe (Q8_0 seed 5's decode
// step, 8.6e-3), and on lavapipe in seed 2's prefill of two of these nine
// types. So each type runs three seeds, and of their six comparisons two
// may exceed the tight bound, still within TestGreedyMatchesCPU's 3e-2; a
// systematic error fails them all.
//
// BONSAI_TEST_CPU_FEATURES=avx2|portable sets the CPU reference's kernels,
// to tell a CPU kernel's disagreement on a machine from the GPU's.
func TestOneLayerLogitsMatchCPU(t *testing.T) {
	if f, ok := map[string]quant.Features{"avx2": quant.FeaturesAVX2, "portable": quant.FeaturesPortable}[os.Getenv("BONSAI_TEST_CPU_FEATURES")]; ok {
		if err := quant.SetFeatures(f); err != nil {
			t.Fatal(err)
		}
		defer quant.SetFeatures(quant.FeaturesAll)
	}
	types := []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q4_0, gguf.Q8_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.F16, gguf.BF16, gguf.F32}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			tol := 2e-4
			if typ == gguf.F16 {
				tol = 1e-3
			}
			var loose []string
			for seed := uint64(1); seed <= 3; seed++ {
				cfg := tinymodel.Small(typ)
				cfg.Layers = 1
				cfg.Tied = typ != gguf.Q1_0
				cfg.Seed = seed
				cpu := loadOn(t, "cpu", cfg)
				gpuM := loadOn(t, "gpu", cfg)
				for _, step := range []struct {
					toks []int32
					pos  int
				}{{[]int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41}, 0}, {[]int32{7}, 11}} {
					if err := cpu.Forward(step.toks, step.pos); err != nil {
						t.Fatal(err)
					}
					if err := gpuM.Forward(step.toks, step.pos); err != nil {
						t.Fatal(err)
					}
					var maxAbs, maxDiff float64
					for i, w := range cpu.Logits() {
						maxAbs = math.Max(maxAbs, math.Abs(float64(w)))
						maxDiff = math.Max(maxDiff, math.Abs(float64(gpuM.Logits()[i]-w)))
					}
					what := fmt.Sprintf("seed %d, %d tokens at %d: logits differ by %.3g (largest %.3g)", seed, len(step.toks), step.pos, maxDiff, maxAbs)
					switch {
					case maxDiff > 3e-2*maxAbs:
						t.Errorf("%s, beyond a rounding step", what)
					case maxDiff > tol*maxAbs:
						loose = append(loose, what)
					}
				}
			}
			if len(loose) > 2 {
				t.Errorf("%d of 6 comparisons outside %.0e: %s", len(loose), tol, strings.Join(loose, "; "))
			} else if len(loose) > 0 {
				t.Logf("rounding steps: %s", strings.Join(loose, "; "))
			}
		})
	}
}

// TestLongPromptMatchesCPU prefills 320 tokens in one pass (as `bonsai
// run` does: the default batch is 512) through each kernel family — Q1_0's
// GEMM, the dequantized f32 path with Q8_0 and F16 activation rounding —
// and decodes a few tokens past it: the attention, RoPE table
// and KV store index math beyond the first few hundred positions, where
// the software adapter used to crash. Tolerances as TestGreedyMatchesCPU.
func TestLongPromptMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("long prompts")
	}
	const promptLen = 320
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_0, gguf.F16} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg := tinymodel.Small(typ)
			cfg.Tied = typ != gguf.Q1_0
			cpu := loadBatch(t, "cpu", cfg, infer.DefaultBatch)
			gpuM := loadBatch(t, "gpu", cfg, infer.DefaultBatch)
			toks := make([]int32, promptLen)
			for i := range toks {
				toks[i] = int32((7*i + 3) % cfg.Vocab)
			}
			decodeBoth(t, cpu, gpuM, toks, 4, 3e-2)
		})
	}
}

// decodeBoth runs prompt and then steps−1 greedy tokens (the CPU's) through
// both models, failing when the logits differ by more than rel of the
// largest, or the greedy tokens differ while the CPU's top two logits are
// further apart than twice that.
func decodeBoth(t *testing.T, cpu, gpuM *infer.Model, prompt []int32, steps int, rel float64) {
	t.Helper()
	pos, toks := 0, prompt
	for step := 0; step < steps; step++ {
		if err := cpu.Forward(toks, pos); err != nil {
			t.Fatal(err)
		}
		if err := gpuM.Forward(toks, pos); err != nil {
			t.Fatal(err)
		}
		want, got := cpu.Logits(), gpuM.Logits()
		var maxAbs, maxDiff float64
		for i := range want {
			maxAbs = math.Max(maxAbs, math.Abs(float64(want[i])))
			maxDiff = math.Max(maxDiff, math.Abs(float64(got[i]-want[i])))
		}
		tol := rel * maxAbs
		if maxDiff > tol || math.IsNaN(maxDiff) {
			t.Fatalf("step %d at position %d: logits differ by %.3g (largest logit %.3g)", step, pos, maxDiff, maxAbs)
		}
		wt, gt := gpu.ArgmaxOf(want), gpu.ArgmaxOf(got)
		if wt != gt && topGap(want) > 2*tol {
			t.Fatalf("step %d: greedy token %d on the GPU, %d on the CPU", step, gt, wt)
		}
		pos += len(toks)
		toks = []int32{wt}
	}
}

// topGap is the distance between the two largest values.
func topGap(v []float32) float64 {
	first, second := math.Inf(-1), math.Inf(-1)
	for _, x := range v {
		switch f := float64(x); {
		case f > first:
			first, second = f, first
		case f > second:
			second = f
		}
	}
	return first - second
}

// rssBytes reads the resident set size from /proc.
func rssBytes(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(data))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// TestLongDecodeNoLeak decodes 1200 tokens, reading the logits back each time, under GC
// pressure (the binding's MapAsync handle bug crashes within seconds of
// per-token readback through it) and checks that memory stays flat.
func TestLongDecodeNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("long decode")
	}
	cfg := tinymodel.Small(gguf.Q1_0)
	cfg.Context = 4096
	cfg.Layers = 1
	m := loadOn(t, "gpu", cfg)
	b := m.Backend()
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	tok := []int32{3}
	var rss0 int64
	for step := 0; step < 1200; step++ {
		if err := m.Forward(tok, step); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		tok[0] = gpu.ArgmaxOf(m.Logits())
		if step == 200 {
			runtime.GC()
			rss0 = rssBytes(t)
		}
	}
	runtime.GC()
	grow := rssBytes(t) - rss0
	t.Logf("RSS growth over 1000 tokens: %d KiB (%s)", grow>>10, b.Info().Adapter)
	if grow > 16<<20 {
		t.Errorf("resident memory grew by %d MiB over 1000 tokens", grow>>20)
	}
}

// TestFusedDecodeMatchesUnfused decodes on GPU models fused (the
// default) against one with every op its own dispatch.
//
// Where both sides run the same kernels in the same summation order the
// fusions change no arithmetic: the matvec groups that share x, the adds
// folded into a matvec, SwiGLU computed in the x load, norm+RoPE, the
// q/k store and the attention prologue. With the fused side's producers
// not rounding rows for q1_xq and attention on the split passes, and each
// decode matvec kernel forced on both sides, the logits agree to f32
// rounding (1e-6 of the largest) at every step, past 32 positions (several
// splits, attn_qk) too; prefill goes through the fused q/k
// norm+RoPE+KV store as well.
//
// The default path also rounds each row once in its producer for q1_xq
// and runs attn_lat, and those sum in another order than the kernels
// they replace (q1_xq adds a row's blocks in its own order; attn_lat:
// TestAttnLatMatchesUnfused). An ulp that lands on a Q8_0 rounding
// boundary then moves one element of the next matvec's input by a step,
// and the cache carries it on: on lavapipe a one-layer model fed the
// CPU's tokens parted from the unfused side at step 3 by 1.4% of the
// largest logit while matching the CPU backend (llama.cpp's order) to
// 1.2e-7, and on an H100 the two-layer model parts at step 10 (0.9%). So the
// default path is held to TestGreedyMatchesCPU's rule for such shifts
// (logits within 3e-2 of the largest, tokens equal unless the top two are
// that close), which a wrong fusion (a stale or missing value) exceeds,
// and to its dispatch count: per decode layer the
// fusion saves at least SwiGLU, two of norm_rope ×2 + store_kv and (≤ 32
// positions: one split) two attention passes. The last layer's SwiGLU is
// encoded at Commit.
func TestFusedDecodeMatchesUnfused(t *testing.T) {
	const saved = 5 // dispatches per layer fewer, at least
	cases := []struct {
		name, kernel string
		exact        bool
	}{
		{"default", "", false},
		{"q1_w1", "q1_w1", true},
		{"q1_popc", "q1_popc", true},
		{"q1_matvec", "q1_matvec", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := tinymodel.Small(gguf.Q1_0)
			cfg.Tied = false
			plain := loadWith(t, "gpu", cfg, 64, softwareOK)
			fused := loadWith(t, "gpu", cfg, 64, softwareOK)
			gpu.Unfuse(plain.Backend().(*gpu.Backend))
			if c.exact {
				gpu.Unround(fused.Backend().(*gpu.Backend))
				gpu.UseAttnPath(fused.Backend().(*gpu.Backend), "split")
			}
			for _, m := range []*infer.Model{plain, fused} {
				gpu.ForceMatVec(m.Backend().(*gpu.Backend), c.kernel)
			}
			toks, pos := []int32{1, 5, 9, 13, 17, 21, 25, 29}, 0
			for step := 0; step < 40; step++ {
				if err := plain.Forward(toks, pos); err != nil {
					t.Fatal(err)
				}
				if err := fused.Forward(toks, pos); err != nil {
					t.Fatal(err)
				}
				want, got := plain.Logits(), fused.Logits()
				if c.exact {
					if maxDiff, maxAbs := gpu.MaxDiff(want, got); maxDiff > 1e-6*maxAbs {
						t.Fatalf("step %d (%d tokens): fused logits differ by %.3g (largest %.3g)", step, len(toks), maxDiff, maxAbs)
					}
				} else {
					maxDiff, maxAbs := gpu.MaxDiff(want, got)
					if tol := 3e-2 * maxAbs; maxDiff > tol || math.IsNaN(maxDiff) {
						t.Fatalf("step %d (%d tokens): fused logits differ by %.3g (largest %.3g)", step, len(toks), maxDiff, maxAbs)
					} else if wt, gt := gpu.ArgmaxOf(want), gpu.ArgmaxOf(got); wt != gt && topGap(want) > 2*tol {
						t.Fatalf("step %d: greedy token %d fused, %d unfused", step, gt, wt)
					}
				}
				if len(toks) == 1 && !c.exact {
					dp := plain.Backend().(*gpu.Backend).LastDispatches()
					df := fused.Backend().(*gpu.Backend).LastDispatches()
					if df > dp-saved*cfg.Layers+1 {
						t.Fatalf("decode: %d dispatches fused, %d unfused, %d layers", df, dp, cfg.Layers)
					}
					if step == 1 {
						t.Logf("decode dispatches: %d fused, %d unfused (%d layers)", df, dp, cfg.Layers)
					}
				}
				pos += len(toks)
				toks = []int32{gpu.ArgmaxOf(want)}
			}
		})
	}
}
