package cpu_test

import (
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

func BenchmarkZZDecode17(b *testing.B) {
	f, err := gguf.Open("/tmp/mdl-b17.gguf")
	if err != nil {
		b.Skip(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	toks := make([]int32, 64)
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	if err := m.Forward(toks, 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := m.Forward([]int32{5}, 64+i%900); err != nil {
			b.Fatal(err)
		}
	}
}
