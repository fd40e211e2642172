package cpu_test

import (
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// BenchmarkDecode times one decode step of a small model with a
// Qwen-sized output head.
func BenchmarkDecode(b *testing.B) {
	cfg := tinymodel.Small(gguf.Q1_0)
	cfg.Vocab = 151936
	f, err := tinymodel.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 4096, Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	pos := 0
	b.ResetTimer()
	for range b.N {
		if err := m.Forward([]int32{1}, pos%4096); err != nil {
			b.Fatal(err)
		}
		pos++
	}
}
