package parity

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// Sliding-window attention: gemma3's tiny with a window of swaWindow on its
// five local layers, continuing a prompt several windows long, so that
// every local layer's attention drops positions from the prompt's 65th
// token on. An f16 cache is llama.cpp's attention without flash attention
// (its −∞ mask over the whole cache), a Q8_0 one its flash attention
// (which skips the masked positions). The prompt and its continuation fit
// one llama.cpp ubatch and its SWA cache (n_swa + n_ubatch cells), so
// llama.cpp keeps the positions in order.
type swaCase struct {
	name string
	typ  gguf.Type
	kv   infer.KVTypes
	gpu  bool // also on the GPU backend (f16 cache)
}

var swaCases = []swaCase{
	{name: "gemma3-swa-q8_0", typ: gguf.Q8_0, gpu: true},
	{name: "gemma3-swa-q8_0-kvq8_0", typ: gguf.Q8_0, kv: infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0}, gpu: true},
}

// swaWindow is the synthetic model's attention.sliding_window.
const swaWindow = 64

// swaPrompt is about 260 tokens of longPrompt's text: four windows.
func swaPrompt() string {
	words := strings.Fields(longPrompt())
	return strings.Join(words[:150], " ") + "."
}

func (c swaCase) oracleFlags() []string {
	return []string{"--cache-type-k", c.kv.K.String(), "--cache-type-v", c.kv.V.String()}
}

func (c swaCase) model() modelCase {
	return modelCase{name: c.name, arch: "gemma3", typ: c.typ, vocab: 4096, prompts: []string{swaPrompt()}}
}

// options is the case's model: gemma3's tiny with the small window.
func (c swaCase) options(t *testing.T, seed uint64) synth.Options {
	o := c.model().options(t, seed)
	o.Shape.Window = swaWindow
	return o
}

func TestSlidingWindowParity(t *testing.T) {
	for _, c := range swaCases {
		t.Run(c.name, func(t *testing.T) {
			g := swaGolden(t, c)
			path, sum := modelFile(t, c.options(t, g.Seed))
			checkGoldenFits(t, c.name, g, sum, c.model().prompts)
			if n := len(g.Runs[0].PromptTokens); n < 3*swaWindow || n+steps > 512 {
				t.Fatalf("the prompt is %d tokens, the case wants %d–%d", n, 3*swaWindow, 512-steps)
			}
			checkLiveOracle(t, path, g, c.oracleFlags()...)
			compareModelWith(t, path, c.typ, g, infer.Options{Backend: "cpu", Context: 512, KV: c.kv})
			// the GPU once (the AVX2 rerun changes only the CPU's
			// kernels), and not in -short: a software adapter takes ~50 s
			if c.gpu && *cpuFeatures == "all" && !testing.Short() {
				t.Run("gpu", func(t *testing.T) { compareGPU(t, path, g, c.kv, gpuRel) })
			}
		})
	}
}

// Without the window the model continues the prompt otherwise: the
// window is what the goldens test.
func TestSlidingWindowMatters(t *testing.T) {
	c := swaCases[0]
	g, err := readGolden(c.name)
	if err != nil {
		t.Fatal(err)
	}
	// a window longer than the context: the local layers keep their RoPE
	o := c.options(t, g.Seed)
	o.Shape.Window = 4096
	path, _ := modelFile(t, o)
	m := loadModel(t, path, infer.Options{Backend: "cpu", Context: 512})
	run := g.Runs[0]
	if err := m.Forward(run.PromptTokens, 0); err != nil {
		t.Fatal(err)
	}
	logits := m.Logits()
	worst := 0.0
	for _, e := range run.Steps[0].Top {
		worst = math.Max(worst, math.Abs(float64(logits[int(e[0])])-e[1])/logitTol(c.typ, e[1]))
	}
	if worst <= 1 {
		t.Fatalf("without the window the first step's logits are llama.cpp's within %.2f of the tolerance", worst)
	}
	t.Logf("without the window the first step's logits are off by up to %.0f× the tolerance", worst)
}

// swaGolden is longGolden for a sliding-window case.
func swaGolden(t *testing.T, c swaCase) golden {
	t.Helper()
	return oneRunGolden(t, c.name, c.model(), steps, c.options, c.oracleFlags())
}

// loadModel loads the model file at path with opts, closed with the test.
func loadModel(t *testing.T, path string, opts infer.Options) *infer.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := infer.Load(f, opts)
	if err != nil {
		if opts.Backend == "gpu" && errors.Is(err, gpu.ErrNoAdapter) && !inCI {
			t.Skipf("no GPU adapter: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
