package gpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// TestNormQ8FusionIsExact checks that a decode token's RMSNorm with its
// Q8_0 rounding, taken into the q1_xq matvecs that read it (the default
// fusion), gives bit for bit what act_q8 followed by q1_xq gives (Fuse
// "norm8"): the q/k/v-shaped product, the gate/up product with its SwiGLU
// epilogue and the down product after it, and the normed row itself; with
// one dispatch fewer per norm.
func TestNormQ8FusionIsExact(t *testing.T) {
	for _, c := range []struct{ k, qkv, ffn int }{{512, 768, 1024}} {
		t.Run(fmt.Sprintf("k%d", c.k), func(t *testing.T) {
			r := rand.New(rand.NewPCG(21, uint64(c.k)))
			x, nw := randFloats(r, c.k, 2), randFloats(r, c.k, 1)
			q1 := func(m, k int) []byte {
				blocks := m * k / 128
				wb := make([]byte, blocks*18)
				for i := range wb {
					wb[i] = byte(r.Uint32())
				}
				for i := 0; i < blocks; i++ {
					wb[i*18], wb[i*18+1] = 0x66, 0x2e // d ≈ 0.1 (f16)
				}
				return wb
			}
			wq, wg, wu, wd := q1(c.qkv, c.k), q1(c.ffn, c.k), q1(c.ffn, c.k), q1(c.k, c.ffn)
			run := func(fuse string) (outs [][]float32, dispatches int) {
				b, err := New(DeviceOptions{Adapter: os.Getenv("BONSAI_GPU_ADAPTER"), AllowSoftware: true}, infer.BackendOptions{GPU: infer.GPUOptions{Fuse: fuse}})
				if err != nil {
					if errors.Is(err, ErrNoAdapter) && os.Getenv("CI") != "true" {
						t.Skipf("no GPU adapter: %v", err)
					}
					t.Fatal(err)
				}
				defer b.Close()
				load := func(name string, typ gguf.Type, shape []int64, data []byte) infer.Weight {
					w, err := b.LoadWeight(infer.WeightData{Name: name, Type: typ, Shape: shape, Data: data})
					if err != nil {
						t.Fatal(err)
					}
					return w
				}
				norm := load("blk.0.attn_norm.weight", gguf.F32, []int64{int64(c.k)}, floatsToBytes(nw))
				q := load("blk.0.attn_qkv.weight", gguf.Q1_0, []int64{int64(c.k), int64(c.qkv)}, wq)
				gate := load("blk.0.ffn_gate.weight", gguf.Q1_0, []int64{int64(c.k), int64(c.ffn)}, wg)
				up := load("blk.0.ffn_up.weight", gguf.Q1_0, []int64{int64(c.k), int64(c.ffn)}, wu)
				down := load("blk.0.ffn_down.weight", gguf.Q1_0, []int64{int64(c.ffn), int64(c.k)}, wd)
				xt, h, y := b.mustTensor(t, "x", 1, c.k), b.mustTensor(t, "h", 1, c.k), b.mustTensor(t, "y", 1, c.qkv)
				g, u, d := b.mustTensor(t, "g", 1, c.ffn), b.mustTensor(t, "u", 1, c.ffn), b.mustTensor(t, "d", 1, c.k)
				b.write(t, xt, x)
				outs = [][]float32{make([]float32, c.qkv), make([]float32, c.k), make([]float32, c.ffn), make([]float32, c.k)}
				b.Begin(batchOf(1, 0))
				b.RMSNorm(h, xt, norm, 1e-6)
				b.MatMul(y, q, h)
				b.RMSNorm(h, xt, norm, 1e-6)
				b.MatMul(g, gate, h)
				b.MatMul(u, up, h)
				b.SwiGLU(g, g, u)
				b.MatMul(d, down, g)
				b.Read(y, outs[0])
				b.Read(h, outs[1])
				b.Read(g, outs[2])
				b.Read(d, outs[3])
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
				return outs, b.LastDispatches()
			}
			fused, nf := run("")
			plain, np := run("norm8")
			for i, name := range []string{"q/k/v product", "normed row", "SwiGLU", "down product"} {
				if !slices.Equal(fused[i], plain[i]) {
					t.Errorf("%s: fused differs from act_q8 + q1_xq by %.3g", name, maxRelErr(fused[i], plain[i]))
				}
			}
			if nf != np-2 {
				t.Errorf("%d dispatches fused, %d unfused: want two fewer", nf, np)
			}
		})
	}
}
