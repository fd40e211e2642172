package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

// A decode step's three sweeps give attnJob's (token, head) pairs' result to
// the bit, for one KV head or several, at depths inside one position block
// and across several, on one thread and on two.
func TestDecodeSweepsMatchPairs(t *testing.T) {
	for _, tc := range []struct {
		heads, kvHeads, dim, depth, threads int
	}{
		{2, 1, 128, 1, 2},
		{2, 1, 128, 700, 2},
		{16, 8, 128, 300, 2},
		{4, 4, 64, 1000, 1},
		{8, 2, 96, 257, 2},
	} {
		t.Run(fmt.Sprintf("%d-%d-%d-d%d-t%d", tc.heads, tc.kvHeads, tc.dim, tc.depth, tc.threads), func(t *testing.T) {
			run := func(pairs bool) []float32 {
				forceDecodeSweeps = 1
				if pairs {
					forceDecodeSweeps = -1
				}
				defer func() { forceDecodeSweeps = 0 }()
				be, err := New(infer.BackendOptions{Threads: tc.threads})
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				if err := be.NewKVCache(infer.KVSpec{Layers: 1, Context: tc.depth + 8, KVHeads: tc.kvHeads, HeadDim: tc.dim}); err != nil {
					t.Fatal(err)
				}
				n := tc.depth + 1
				q, _ := be.NewTensor("q", n, tc.heads*tc.dim)
				k, _ := be.NewTensor("k", n, tc.kvHeads*tc.dim)
				v, _ := be.NewTensor("v", n, tc.kvHeads*tc.dim)
				out, _ := be.NewTensor("out", 1, tc.heads*tc.dim)
				r := rand.New(rand.NewSource(int64(tc.depth)))
				for _, x := range []infer.Tensor{q, k, v} {
					for i := range x.(*tensor).data {
						x.(*tensor).data[i] = float32(r.NormFloat64())
					}
				}
				be.Begin(infer.Batch{Tokens: make([]int32, n)})
				be.StoreKV(0, k, v)
				if err := be.Commit(); err != nil {
					t.Fatal(err)
				}
				be.Begin(infer.Batch{Tokens: []int32{0}, Pos: tc.depth})
				be.Attention(out, q, 0, infer.Attn{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.dim, Scale: 0.125})
				got := make([]float32, tc.heads*tc.dim)
				be.Read(out, got)
				if err := be.Commit(); err != nil {
					t.Fatal(err)
				}
				return got
			}
			pairs, sweeps := run(true), run(false)
			for i := range pairs {
				if pairs[i] != sweeps[i] {
					t.Fatalf("output %d: sweeps %v, pairs %v", i, sweeps[i], pairs[i])
				}
			}
		})
	}
}
