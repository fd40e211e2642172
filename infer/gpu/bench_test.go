package gpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// BenchmarkPromptGemm times each prompt kernel of the Q1_0 row of the
// kernel table alone on the 8B's and 1.7B's shapes, 512 tokens, 10
// dispatches a pass (the GPU's time dominates the wall clock around
// Commit), for a new kernel to be measured against the ones there are:
//
//	BONSAI_GPU_ADAPTER=… go test ./infer/gpu -run '^$' -bench PromptGemm
func BenchmarkPromptGemm(bb *testing.B) {
	b := newTestBackend(bb)
	const n, reps = 512, 10
	r := rand.New(rand.NewPCG(9, 10))
	for si, s := range []struct{ k, m int }{{4096, 6144}, {4096, 24576}, {12288, 4096}, {4096, 4096}, {2048, 4096}, {2048, 12288}, {6144, 2048}} {
		blocks := s.m * s.k / 128
		wb := make([]byte, blocks*18)
		for i := range wb {
			wb[i] = byte(r.Uint32())
		}
		for i := 0; i < blocks; i++ {
			wb[i*18], wb[i*18+1] = 0x66, 0x2e // d ≈ 0.1 (f16)
		}
		wI, err := b.LoadWeight(infer.WeightData{Name: fmt.Sprintf("blk.0.ffn_up.b%d", si), Type: gguf.Q1_0, Shape: []int64{int64(s.k), int64(s.m)}, Data: wb})
		if err != nil {
			bb.Fatal(err)
		}
		x := b.mustTensor(bb, fmt.Sprintf("x%d", si), n, s.k)
		y := b.mustTensor(bb, fmt.Sprintf("y%d", si), n, s.m)
		b.write(bb, x, randFloats(r, n*s.k, 1))
		mm := matmul{dst: y, w: wI.(*weight), x: x, rows: n, n: n}
		for _, k := range layoutOf(gguf.Q1_0).prompt {
			bb.Run(fmt.Sprintf("%dx%d/%s", s.m, s.k, k.name), func(bb *testing.B) {
				for bb.Loop() {
					b.Begin(batchOf(n, 0))
					for range reps {
						k.run(b, mm)
					}
					if err := b.Commit(); err != nil {
						bb.Fatal(err)
					}
				}
				flops := 2 * float64(s.m) * float64(s.k) * n * reps
				bb.ReportMetric(flops/bb.Elapsed().Seconds()*float64(bb.N)/1e12, "TFLOP/s")
			})
		}
	}
}
