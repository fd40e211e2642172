package infer_test

import (
	"errors"
	"math"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

func open(t *testing.T, cfg tinymodel.Config) *gguf.File {
	t.Helper()
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReadHyperparams(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q8_0)
	cfg.Tied = false
	hp, err := infer.ReadHyperparams(open(t, cfg), "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	want := infer.Hyperparams{Arch: "qwen3", Layers: 2, ContextTrain: 512, Embed: 256, FFN: 512, Heads: 4, KVHeads: 2,
		HeadDim: 64, ValueDim: 64, RMSEps: 1e-6, Vocab: 96, TiedOutput: false,
		Rope: infer.Rope{HeadDim: 64, Dims: 64, Base: 1e6, FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigContext: 512}}
	if hp != want {
		t.Fatalf("got  %+v\nwant %+v", hp, want)
	}
}

// YaRN as llama.cpp sets it up for Bonsai: factor 4 over 16384, ext_factor 1,
// and an attention factor that cancels rope_yarn's own magnitude scaling
// once, so the net scale of cos/sin is 1 + 0.1·ln 4.
func TestReadHyperparamsYarn(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q8_0)
	cfg.Yarn, cfg.YarnOrigCtx = 4, 16384
	hp, err := infer.ReadHyperparams(open(t, cfg), "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	r := hp.Rope
	if r.FreqScale != 0.25 || r.ExtFactor != 1 || r.OrigContext != 16384 {
		t.Fatalf("rope %+v", r)
	}
	if math.Abs(float64(r.AttnFactor)-1) > 1e-6 {
		t.Errorf("attn factor %v, want 1 (get_mscale(4)/(1+0.1 ln 4))", r.AttnFactor)
	}
	cos, sin := make([]float32, 32), make([]float32, 32)
	r.Angles(3, cos, sin)
	mag := math.Hypot(float64(cos[0]), float64(sin[0]))
	if want := 1 + 0.1*math.Log(4); math.Abs(mag-want) > 1e-5 {
		t.Errorf("rotation magnitude %v, want %v", mag, want)
	}
}

func TestLoadErrors(t *testing.T) {
	build := func(mutate func(*tinymodel.Config)) *gguf.File {
		cfg := tinymodel.Small(gguf.Q8_0)
		mutate(&cfg)
		return open(t, cfg)
	}
	tests := []struct {
		name string
		f    *gguf.File
		want error
	}{
		{"unknown architecture", build(func(c *tinymodel.Config) {
			c.Extra = map[string]any{"general.architecture": "mamba"}
		}), infer.ErrUnsupportedArch},
		{"heads not a multiple of kv heads", build(func(c *tinymodel.Config) {
			c.Extra = map[string]any{"qwen3.attention.head_count_kv": uint32(3)}
		}), infer.ErrBadShape},
		{"missing block count", build(func(c *tinymodel.Config) {
			c.Extra = map[string]any{"qwen3.block_count": uint32(0)}
		}), infer.ErrBadShape},
		{"layer count beyond the tensors", build(func(c *tinymodel.Config) {
			c.Extra = map[string]any{"qwen3.block_count": uint32(3)}
		}), infer.ErrMissingTensor},
		{"unknown rope scaling", build(func(c *tinymodel.Config) {
			c.Extra = map[string]any{"qwen3.rope.scaling.type": "longrope"}
		}), infer.ErrUnsupportedArch},
		{"wrong head dim", build(func(c *tinymodel.Config) {
			c.Extra = map[string]any{"qwen3.attention.key_length": uint32(32), "qwen3.attention.value_length": uint32(32)}
		}), infer.ErrBadShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := infer.Load(tc.f, infer.Options{Backend: "cpu", Context: 16})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestUnknownBackend(t *testing.T) {
	_, err := infer.Load(open(t, tinymodel.Small(gguf.Q8_0)), infer.Options{Backend: "tpu"})
	if !errors.Is(err, infer.ErrUnknownBackend) {
		t.Fatalf("Load on tpu = %v, want ErrUnknownBackend", err)
	}
}
