package quant

import (
	"math/rand/v2"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /*RUSAGE_THREAD*/, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZSpeed(t *testing.T) {
	if os.Getenv("SPEED") == "" {
		t.Skip()
	}
	runtime.LockOSThread()
	r := rand.New(rand.NewPCG(1, 1))
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q2_0, gguf.Q4_0, gguf.Q8_0} {
		for _, rows := range []int{256, 6144, 65536} {
			for _, tokens := range []int{1, 8} {
				m := randMatrixFast(nil, r, typ, rows, 2048)
				x := randVec(r, 2048*tokens)
				p := NewPool(1)
				var a Activations
				p.Quantize(&a, typ, x, 2048, tokens)
				y := make([]float32, rows*tokens)
				iters := max(1, 2000000000/(rows*2048*tokens))
				p.MatMul(m, &a, y)
				c0, w0 := threadCPU(), time.Now()
				for i := 0; i < iters; i++ {
					p.MatMul(m, &a, y)
				}
				cpu, wall := threadCPU()-c0, time.Since(w0)
				macs := float64(rows) * 2048 * float64(tokens) * float64(iters)
				t.Logf("%s rows %6d tokens %d: %6.1f GMAC/s cpu, %5.2f GB/s weights cpu, cpu/wall %.2f", typ, rows, tokens,
					macs/cpu.Seconds()/1e9, float64(len(m.Data))*float64(iters)/cpu.Seconds()/1e9, cpu.Seconds()/wall.Seconds())
				p.Close()
			}
		}
	}
}
