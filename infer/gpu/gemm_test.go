package gpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// TestPromptGemmsMatchCPU runs each prompt kernel of the Q1_0 row of the
// kernel table (layouts) alone over partial tiles (tokens 2…130 against
// 64 and 128, rows not a multiple of the tile) against the CPU's dot; a
// kernel that declines a shape must leave it to the next, and the last
// (q1_matmul) takes every shape.
func TestPromptGemmsMatchCPU(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(7, 8))
	shapes := []struct{ m, k int }{{100, 128}, {192, 256}, {68, 384}, {90, 256}}
	ns := []int{2, 5, 63, 64, 65, 127, 130}
	q1 := layoutOf(gguf.Q1_0)
	for si, s := range shapes {
		wv := randFloats(r, s.m*s.k, 1)
		wb := quantizeMatrix(t, gguf.Q1_0, s.m, s.k, wv)
		wI, err := b.LoadWeight(infer.WeightData{Name: fmt.Sprintf("blk.0.ffn_up.g%d", si), Type: gguf.Q1_0, Shape: []int64{int64(s.k), int64(s.m)}, Data: wb})
		if err != nil {
			t.Fatal(err)
		}
		w := wI.(*weight)
		for _, n := range ns {
			xv := randFloats(r, n*s.k, 1)
			want := refMatMul(gguf.Q1_0, wb, s.m, s.k, xv, n)
			for ki, k := range q1.prompt {
				t.Run(fmt.Sprintf("%dx%d/n%d/%s", s.m, s.k, n, k.name), func(t *testing.T) {
					x := b.mustTensor(t, "x", n, s.k)
					y := b.mustTensor(t, "y", n, s.m)
					b.write(t, x, xv)
					took := false
					got := b.run(t, n, 0, func() { took = k.run(b, matmul{dst: y, w: w, x: x, rows: n, n: n}) }, y)[0]
					last := ki == len(q1.prompt)-1
					if s.m%4 != 0 && took && !last || !took && (last || s.m%4 == 0) {
						t.Fatalf("took the shape: %v", took)
					}
					if !took {
						return
					}
					if c := b.LastCensus(); c[k.name] == 0 {
						t.Errorf("census %v: no %s", c, k.name)
					}
					if e := maxRelErr(got, want); e > 1e-5 {
						t.Errorf("max error %.3g of the largest value; got[0:4] %v want %v", e, got[:4], want[:4])
					}
				})
			}
		}
	}
}

// A prompt pass over Q1_0 runs q1_lutgemm where the device grants its
// 17.6 KB of workgroup memory; with the 16 KB every WebGPU device grants,
// q1_gemm2's 64 × 64 tile instead of its 128 × 64 one.
func TestPromptGemmFitsWorkgroupMemory(t *testing.T) {
	b := newTestBackend(t)
	const k, m, n = 256, 4096, 512
	r := rand.New(rand.NewPCG(71, 72))
	w := b.matrixWeight(t, "blk.0.ffn_gate", gguf.Q1_0, k, m, randFloats(r, m*k, 1))
	x, y := b.mustTensor(t, "x", n, k), b.mustTensor(t, "y", n, m)
	b.write(t, x, randFloats(r, n*k, 1))
	b.run(t, n, 0, func() { b.MatMul(y, w, x) })
	if c := b.LastCensus(); c["q1_lutgemm"] != 1 {
		t.Errorf("%d KB of workgroup memory: %v, want q1_lutgemm", b.d.Limits.MaxComputeWorkgroupStorageSize>>10, c)
	}
	granted := b.d.Limits.MaxComputeWorkgroupStorageSize
	defer func() { b.d.Limits.MaxComputeWorkgroupStorageSize = granted }()
	for _, c := range []struct {
		bytes uint32
		lut   bool
		tile  gemmTile
	}{{32 << 10, true, gemmTile{2, 1}}, {24 << 10, true, gemmTile{2, 1}}, {16 << 10, false, gemmTile{1, 1}}} {
		b.d.Limits.MaxComputeWorkgroupStorageSize = c.bytes
		if lut := lutGemmWorkgroupBytes <= int(c.bytes); lut != c.lut {
			t.Errorf("%d bytes: q1_lutgemm %v, want %v", c.bytes, lut, c.lut)
		}
		if tile, ok := b.gemmTile(w.(*weight), n); !ok || tile != c.tile {
			t.Errorf("%d bytes: q1_gemm2 tile %v (%v), want %v", c.bytes, tile, ok, c.tile)
		}
	}
}

// Two prompt matmuls of one x (gate and up) pack it for q1_lutgemm once,
// with the products of separate passes; a write to x between them packs
// it again. (A pass of rowsMaxTokens or fewer takes the rows column.)
func TestLutGemmSharesPacking(t *testing.T) {
	const k, m, n = 256, 96, rowsMaxTokens + 4
	b := newTestBackend(t)
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

// A pass of a few rows (rowsMaxTokens or fewer: several sequences' steps,
// a short verify) joins matmuls of one x into one q1_matmul dispatch, as
// decoding joins its matvecs, with each product the bits of the matmul
// alone; a residual add after one is folded into its dispatch.
func TestRowsMatVecGroups(t *testing.T) {
	const k, m, n = 256, 96, 5
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(63, 64))
	wg, wu := b.matrixWeight(t, "blk.0.ffn_gate", gguf.Q1_0, k, m, randFloats(r, m*k, 1)), b.matrixWeight(t, "blk.0.ffn_up", gguf.Q1_0, k, m, randFloats(r, m*k, 1))
	x, yg, yu := b.mustTensor(t, "x", n, k), b.mustTensor(t, "yg", n, m), b.mustTensor(t, "yu", n, m)
	z := b.mustTensor(t, "z", n, m)
	b.write(t, x, randFloats(r, n*k, 1))
	zv := randFloats(r, n*m, 1)
	alone := [][]float32{b.run(t, n, 0, func() { b.MatMul(yg, wg, x) }, yg)[0], b.run(t, n, 0, func() { b.MatMul(yu, wu, x) }, yu)[0]}
	both := b.run(t, n, 0, func() { b.MatMul(yg, wg, x); b.MatMul(yu, wu, x) }, yg, yu)
	if c := b.LastCensus(); c["q1_matmul"] != 1 || len(c) != 1 {
		t.Errorf("two matmuls of one x over %d rows: %v, want one q1_matmul", n, c)
	}
	for i := range alone {
		for j := range alone[i] {
			if both[i][j] != alone[i][j] {
				t.Fatalf("product %d, value %d: %v together, %v alone", i, j, both[i][j], alone[i][j])
			}
		}
	}
	b.write(t, z, zv)
	sum := b.run(t, n, 0, func() { b.MatMul(yg, wg, x); b.Add(z, z, yg) }, z)[0]
	if c := b.LastCensus(); c["q1_matmul"] != 1 || len(c) != 1 {
		t.Errorf("a matmul and its residual add over %d rows: %v, want one q1_matmul", n, c)
	}
	for j := range sum {
		if want := zv[j] + alone[0][j]; sum[j] != want {
			t.Fatalf("value %d: %v with the add folded in, want %v", j, sum[j], want)
		}
	}
}
