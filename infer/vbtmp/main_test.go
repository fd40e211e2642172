package vb

import (
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
)

func TestTiming(t *testing.T) {
	f, _ := defaultmodel.Open()
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 2, Context: 1024})
	if err != nil { t.Fatal(err) }
	prompt := make([]int32, 100)
	for i := range prompt { prompt[i] = int32(i*37 % 5000) }
	s := infer.NewSequence(m)
	s.Prefill(prompt, nil)
	s.Verify(prompt[:16]); s.Rewind(100)
	for round := 0; round < 2; round++ {
	best := time.Hour
	for i := 0; i < 20; i++ { t0 := time.Now(); s.Append(int32(i)); best = min(best, time.Since(t0)) }
	s.Rewind(100)
	t.Logf("step %v", best)
	for _, n := range []int{1, 2, 3, 4, 6, 8, 10, 12, 13, 16} {
		toks := prompt[:n]
		b := time.Hour
		for i := 0; i < 8; i++ { t0 := time.Now(); s.Verify(toks); b = min(b, time.Since(t0)); s.Rewind(100) }
		t.Logf("verify %d: %v = %.2f steps", n, b, float64(b)/float64(best))
	}
	}
}
