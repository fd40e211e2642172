package infer_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// denseFile writes synth's tiny model of arch (llama, qwen2) with its vocab
// cut to 1024; edit, if set, changes the shape first.
func denseFile(t *testing.T, arch string, typ gguf.Type, edit func(*synth.Shape)) *gguf.File {
	t.Helper()
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab = 1024
	if edit != nil {
		edit(&s)
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
	return f
}

// A llama or qwen2 file with weights that llama.cpp's graph would use and
// bonsai's does not, or whose rope_freqs cannot be the factors, is refused
// at load, saying why, rather than run wrongly.
func TestDenseArchsRefuse(t *testing.T) {
	noLlama3 := func(s *synth.Shape) { s.Llama3 = nil }
	for _, tc := range []struct {
		name  string
		arch  string
		edit  func(*synth.Shape)
		set   map[string]any
		extra map[string][]int64
		want  error
	}{
		{"llama attention output bias", "llama", nil, nil, map[string][]int64{"blk.1.attn_output.bias": {256}}, infer.ErrUnsupportedArch},
		{"llama FFN bias", "llama", nil, nil, map[string][]int64{"blk.0.ffn_down.bias": {256}}, infer.ErrUnsupportedArch},
		{"llama experts", "llama", nil, map[string]any{"llama.expert_count": uint32(8)}, nil, infer.ErrUnsupportedArch},
		{"llama rope_freqs of the wrong length", "llama", noLlama3, nil, map[string][]int64{"rope_freqs.weight": {31}}, infer.ErrBadShape},
		{"llama rope_freqs of zeros", "llama", noLlama3, nil, map[string][]int64{"rope_freqs.weight": {32}}, infer.ErrBadShape},
		{"qwen2 output bias", "qwen2", nil, nil, map[string][]int64{"output.bias": {1024}}, infer.ErrUnsupportedArch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rewrite(t, denseFile(t, tc.arch, gguf.Q8_0, tc.edit), tc.set, tc.extra)
			_, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 64, Threads: 1})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load: %v, want %v", err, tc.want)
			}
		})
	}
}

// gemma3 runs past its sliding window (16 here) to the context asked for:
// a 40-token prompt in one pass and fed a token at a time give the same
// last logits (the prompt pass's window and the decode steps' agree), and
// they are not those of the same weights with a window past the context.
func TestGemma3RunsPastItsWindow(t *testing.T) {
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(3 + 11*i)
	}
	last := func(window int, steps bool) []float32 {
		f := denseFile(t, "gemma3", gguf.Q8_0, func(s *synth.Shape) { s.Window = window })
		m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 64, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.Context() != 64 || len(m.Notes) != 0 {
			t.Fatalf("context %d (notes %q), want 64", m.Context(), m.Notes)
		}
		if !steps {
			if err := m.Forward(prompt, 0); err != nil {
				t.Fatal(err)
			}
			return slices.Clone(m.Logits())
		}
		for i, tok := range prompt {
			if err := m.Forward([]int32{tok}, i); err != nil {
				t.Fatal(err)
			}
		}
		return slices.Clone(m.Logits())
	}
	pass, steps, full := last(16, false), last(16, true), last(1024, false)
	var maxAbs, dSteps, dFull float64
	for i := range pass {
		maxAbs = max(maxAbs, math.Abs(float64(pass[i])))
		dSteps = max(dSteps, math.Abs(float64(steps[i]-pass[i])))
		dFull = max(dFull, math.Abs(float64(full[i]-pass[i])))
	}
	t.Logf("largest logit %.3g: token by token %.3g off, without the window %.3g", maxAbs, dSteps, dFull)
	if dSteps > 1e-2*maxAbs {
		t.Errorf("token by token the logits differ from the prompt pass's by %.3g (largest %.3g)", dSteps, maxAbs)
	}
	if dFull < 1e-1*maxAbs {
		t.Errorf("without the window the logits differ by only %.3g (largest %.3g)", dFull, maxAbs)
	}
}

// gemma3.attention.sliding_window_pattern as llama.cpp reads it: a period
// whose last layer is global (6 by default) or one bool per layer. The
// default period spelled either way gives the default's logits; every
// layer local (a period of 0) gives others; an array of the wrong length
// or a pattern of another type is refused.
func TestGemma3WindowPattern(t *testing.T) {
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(5 + 7*i)
	}
	load := func(set map[string]any) (*infer.Model, error) {
		f := denseFile(t, "gemma3", gguf.Q8_0, func(s *synth.Shape) { s.Window = 16 })
		if set != nil {
			f = rewrite(t, f, set, nil)
		}
		return infer.Load(f, infer.Options{Backend: "cpu", Context: 64, Threads: 1})
	}
	logits := func(set map[string]any) []float32 {
		m, err := load(set)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Forward(prompt, 0); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(m.Logits())
	}
	const key = "gemma3.attention.sliding_window_pattern"
	def := logits(nil)
	for _, same := range []any{uint32(6), []bool{true, true, true, true, true, false}} {
		if got := logits(map[string]any{key: same}); !slices.Equal(got, def) {
			t.Errorf("pattern %v: the logits are not the default's", same)
		}
	}
	if got := logits(map[string]any{key: uint32(0)}); slices.Equal(got, def) {
		t.Error("every layer local: the logits are the default's")
	}
	for _, bad := range []any{[]bool{true, false}, "6"} {
		if _, err := load(map[string]any{key: bad}); !errors.Is(err, infer.ErrBadShape) {
			t.Errorf("pattern %v: %v, want ErrBadShape", bad, err)
		}
	}
}
