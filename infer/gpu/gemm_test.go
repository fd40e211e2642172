package gpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// TestGemmTilesMatchCPU runs every q1_gemm2 tile over partial tiles (tokens
// 2…130 against 64 and 128, rows not a multiple of the tile) against the
// CPU's dot.
func TestGemmTilesMatchCPU(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(7, 8))
	shapes := []struct{ m, k int }{{100, 128}, {192, 256}, {68, 384}}
	ns := []int{2, 5, 63, 64, 65, 127, 130}
	for si, s := range shapes {
		wv := randFloats(r, s.m*s.k, 1)
		wb := quantizeMatrix(t, gguf.Q1_0, s.m, s.k, wv)
		w, err := b.LoadWeight(infer.WeightData{Name: fmt.Sprintf("blk.0.ffn_up.g%d", si), Type: gguf.Q1_0, Shape: []int64{int64(s.k), int64(s.m)}, Data: wb})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			xv := randFloats(r, n*s.k, 1)
			want := refMatMul(gguf.Q1_0, wb, s.m, s.k, xv, n)
			for _, g := range GemmKernels[1:] {
				t.Run(fmt.Sprintf("%dx%d/n%d/%s", s.m, s.k, n, g), func(t *testing.T) {
					b.gemm = g
					defer func() { b.gemm = "" }()
					sh, lut := b.lutFor(w.(*weight), n, n)
					if _, named := lutShapes[g]; named && !lut {
						t.Skipf("no %s here (%+v needs %d bytes of workgroup memory)", g, sh, lutGemmWorkgroupBytes(sh))
					}
					if tl, ok := b.gemmTile(w.(*weight), n); !lut && !ok {
						t.Skipf("no %s tile here (%+v)", g, tl)
					}
					x := b.mustTensor(t, "x", n, s.k)
					y := b.mustTensor(t, "y", n, s.m)
					b.write(t, x, xv)
					got := b.run(t, n, 0, func() { b.MatMul(y, w, x) }, y)[0]
					if got := b.LastCensus()["q1_lutgemm"]; got != boolInt(lut) {
						t.Errorf("%d q1_lutgemm dispatches", got)
					}
					if e := maxRelErr(got, want); e > 1e-5 {
						t.Errorf("max error %.3g of the largest value; got[0:4] %v want %v", e, got[:4], want[:4])
					}
				})
			}
		}
	}
}

// TestGemmBench times the prompt GEMM kernels at the 8B (and 1.7B)
// shapes when BONSAI_GEMM_BENCH is set (the token count, e.g. 512): wall
// time over reps dispatches in one pass, after a warm-up pass, each
// kernel's output checked against the first's (tile64, or the first of
// BONSAI_GEMM_KERNELS, a comma-separated list).
func TestGemmBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BONSAI_GEMM_BENCH"))
	if n < 2 {
		t.Skip("BONSAI_GEMM_BENCH (tokens) not set")
	}
	reps := 20
	if v, err := strconv.Atoi(os.Getenv("BONSAI_GEMM_REPS")); err == nil && v > 0 {
		reps = v
	}
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(9, 10))
	shapes := []struct{ k, m int }{{4096, 6144}, {4096, 24576}, {12288, 4096}, {4096, 4096}, {2048, 4096}, {2048, 12288}, {6144, 2048}}
	kernels := []string{"tile64", "r1x1", "r2x1", "r1x2", "r2x2", "gemm2", "lut4", "lut8", "lut4s", "lut8s"}
	if v := os.Getenv("BONSAI_GEMM_KERNELS"); v != "" {
		kernels = strings.Split(v, ",") // the first is the reference the others are checked against
	}
	for si, s := range shapes {
		blocks := s.m * s.k / 128
		wb := make([]byte, blocks*18)
		for i := range wb {
			wb[i] = byte(r.Uint32())
		}
		for i := 0; i < blocks; i++ {
			wb[i*18], wb[i*18+1] = 0x66, 0x2e // d ≈ 0.1 (f16)
		}
		w, err := b.LoadWeight(infer.WeightData{Name: fmt.Sprintf("blk.0.ffn_up.b%d", si), Type: gguf.Q1_0, Shape: []int64{int64(s.k), int64(s.m)}, Data: wb})
		if err != nil {
			t.Fatal(err)
		}
		x := b.mustTensor(t, fmt.Sprintf("x%d", si), n, s.k)
		y := b.mustTensor(t, fmt.Sprintf("y%d", si), n, s.m)
		b.write(t, x, randFloats(r, n*s.k, 1))
		var ref []float32
		for _, g := range kernels {
			b.gemm = g
			got := b.run(t, n, 0, func() { b.MatMul(y, w, x) }, y)[0]
			e := 0.0
			if ref == nil {
				ref = got
			} else {
				e = maxRelErr(got, ref)
			}
			best := time.Duration(1 << 62)
			for trial := 0; trial < 3; trial++ {
				b.Begin(batchOf(n, 0))
				start := time.Now()
				for i := 0; i < reps; i++ {
					b.MatMul(y, w, x)
				}
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
				best = min(best, time.Since(start)/time.Duration(reps))
			}
			tl, _ := b.gemmTile(w.(*weight), n)
			flops := 2 * float64(s.m) * float64(s.k) * float64(n)
			fmt.Printf("gemm %5d->%-5d n=%d %-6s tile=%v %8.1f us %6.2f TFLOP/s err %.2g\n",
				s.k, s.m, n, g, tl, float64(best.Nanoseconds())/1e3, flops/best.Seconds()/1e12, e)
		}
		b.gemm = ""
	}
}

// Two prompt matmuls of one x (gate and up) pack it for q1_lutgemm once,
// with the products of separate passes; a write to x between them packs
// it again.
func TestLutGemmSharesPacking(t *testing.T) {
	const k, m, n = 256, 96, 5
	b := newTestBackendWith(t, infer.GPUOptions{Gemm: "lut4s"})
	r := rand.New(rand.NewPCG(61, 62))
	wg, wu := b.matrixWeight(t, "blk.0.ffn_gate", gguf.Q1_0, k, m, randFloats(r, m*k, 1)), b.matrixWeight(t, "blk.0.ffn_up", gguf.Q1_0, k, m, randFloats(r, m*k, 1))
	x, yg, yu := b.mustTensor(t, "x", n, k), b.mustTensor(t, "yg", n, m), b.mustTensor(t, "yu", n, m)
	b.write(t, x, randFloats(r, n*k, 1))
	alone := [][]float32{b.run(t, n, 0, func() { b.MatMul(yg, wg, x) }, yg)[0], b.run(t, n, 0, func() { b.MatMul(yu, wu, x) }, yu)[0]}
	both := b.run(t, n, 0, func() { b.MatMul(yg, wg, x); b.MatMul(yu, wu, x) }, yg, yu)
	if c := b.LastCensus(); c["quantize_q8p"] != 1 || c["q1_lutgemm"] != 2 {
		t.Errorf("two matmuls of one x: %v", c)
	}
	for i := range alone {
		for j := range alone[i] {
			if both[i][j] != alone[i][j] {
				t.Fatalf("product %d, value %d: %v together, %v alone", i, j, both[i][j], alone[i][j])
			}
		}
	}
	b.run(t, n, 0, func() { b.MatMul(yg, wg, x); b.Unary(x, x, infer.ActSiLU); b.MatMul(yu, wu, x) })
	if c := b.LastCensus(); c["quantize_q8p"] != 2 {
		t.Errorf("x rewritten between two matmuls: %v", c)
	}
}
