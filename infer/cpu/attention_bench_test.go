package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

// BenchmarkAttentionDepth times one layer's attention for a decode step
// and for a 64-token prompt chunk after depth positions, in the 1.7B's
// shape (16 query heads over 8 KV heads of 128), on 2 threads, over the
// whole context and within a sliding window of 1024 (Gemma 3's).
func BenchmarkAttentionDepth(b *testing.B) {
	const heads, kvHeads, dim, depth = 16, 8, 128, 4096
	for _, kv := range []infer.KVTypes{{}, {K: infer.KVQ8_0, V: infer.KVQ8_0}} {
		for _, rows := range []int{1, 64} {
			for _, window := range []int{0, 1024} {
				b.Run(fmt.Sprintf("%s/rows%d/window%d", kv.K, rows, window), func(b *testing.B) {
					be, err := New(infer.BackendOptions{Threads: 2})
					if err != nil {
						b.Fatal(err)
					}
					defer be.Close()
					if err := be.NewKVCache(infer.KVSpec{Layers: 1, Context: depth + rows, KVHeads: kvHeads, HeadDim: dim, KVTypes: kv}); err != nil {
						b.Fatal(err)
					}
					const fill = 512
					q, _ := be.NewTensor("q", fill, heads*dim)
					k, _ := be.NewTensor("k", fill, kvHeads*dim)
					v, _ := be.NewTensor("v", fill, kvHeads*dim)
					out, _ := be.NewTensor("out", fill, heads*dim)
					r := rand.New(rand.NewSource(1))
					for _, t := range []infer.Tensor{q, k, v} {
						for i := range t.(*tensor).data {
							t.(*tensor).data[i] = float32(r.NormFloat64())
						}
					}
					toks := make([]int32, fill)
					for p := 0; p < depth+rows; p += fill {
						n := min(fill, depth+rows-p)
						be.Begin(infer.Batch{Tokens: toks[:n], Pos: p})
						be.StoreKV(0, k, v)
						if err := be.Commit(); err != nil {
							b.Fatal(err)
						}
					}
					a := infer.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: dim, Scale: 0.088, Window: window}
					b.ResetTimer()
					for range b.N {
						be.Begin(infer.Batch{Tokens: toks[:rows], Pos: depth})
						be.Attention(out, q, 0, a)
						if err := be.Commit(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
