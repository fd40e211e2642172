package infer_test

import (
	"errors"
	"path/filepath"
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

// gemma3's windowed layers attend like full attention until a position
// reaches the window; past it bonsai, whose attention has no window yet,
// stops with ErrContextFull instead of answering otherwise than llama.cpp,
// and the model's context is the window.
func TestGemma3StopsAtItsWindow(t *testing.T) {
	f := denseFile(t, "gemma3", gguf.Q8_0, func(s *synth.Shape) { s.Window = 16 })
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := make([]int32, 16)
	for i := range prompt {
		prompt[i] = int32(3 + 11*i)
	}
	if err := m.Forward(prompt, 0); err != nil {
		t.Fatalf("16 tokens in a window of 16: %v", err)
	}
	if err := m.Forward([]int32{7}, 16); !errors.Is(err, infer.ErrContextFull) {
		t.Fatalf("a 17th token: %v, want ErrContextFull", err)
	}
	if m.Context() != 16 || len(m.Notes) == 0 {
		t.Errorf("context %d (notes %q), want the window's 16, said", m.Context(), m.Notes)
	}
}
