package cpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
)

// hadamardRef is dst = H(s ⊙ P(x)) (or s ⊙ H(P(x))) for one row by dense
// float64 matrices written from the definitions: P as a permutation of
// head indices, H as the block-diagonal matrix of (−1)^popcount(i&j)/√block.
func hadamardRef(x []float32, block int, signs []float32, after bool, g infer.HeadOrder) []float64 {
	n := len(x)
	p := make([]float64, n) // P(x)
	for c := range n {
		from := c
		if g.HeadDim > 0 {
			rep := n / g.HeadDim / g.KHeads
			head, off := c/g.HeadDim, c%g.HeadDim
			k, r := head/rep, head%rep            // grouped head k·rep + r …
			from = (r*g.KHeads+k)*g.HeadDim + off // … is tiled head r·nk + k
		}
		p[c] = float64(x[from])
	}
	if signs != nil && !after {
		for c := range p {
			p[c] *= float64(signs[c])
		}
	}
	out := make([]float64, n)
	norm := 1 / math.Sqrt(float64(block))
	for r := range n {
		var sum float64
		for c := range n {
			if r/block != c/block {
				continue // H is block-diagonal
			}
			h := norm
			if bits.OnesCount(uint(r%block&(c%block)))%2 == 1 {
				h = -norm
			}
			sum += h * p[c]
		}
		out[r] = sum
	}
	if signs != nil && after {
		for c := range out {
			out[c] *= float64(signs[c])
		}
	}
	return out
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func randomSigns(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = 1
		if rng.IntN(2) == 0 {
			s[i] = -1
		}
	}
	return s
}

// hadamardPass runs Hadamard over the first `active` rows of x (rows ×
// len(x)/rows) and returns dst's whole contents.
func hadamardPass(t *testing.T, b *Backend, x []float32, rows, active int, r infer.Rotation, inPlace bool) ([]float32, error) {
	t.Helper()
	cols := len(x) / rows
	tx, err := b.NewTensor("x", rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	td := tx
	if !inPlace {
		if td, err = b.NewTensor("dst", rows, cols); err != nil {
			t.Fatal(err)
		}
	}
	copy(tx.(*tensor).data, x)
	all := make([]int32, rows)
	b.Begin(infer.Batch{Tokens: all[:active]})
	b.Hadamard(td, tx, r)
	if err := b.Commit(); err != nil {
		return nil, err
	}
	out := make([]float32, rows*cols)
	b.Begin(infer.Batch{Tokens: all})
	b.Read(td, out)
	return out, b.Commit()
}

func TestHadamardMatchesDenseReference(t *testing.T) {
	b, err := New(infer.BackendOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cases := []struct {
		name        string
		cols, block int
		signs       bool
		after       bool
		regroup     infer.HeadOrder
		inPlace     bool
	}{
		{name: "block 1 is the identity", cols: 4, block: 1},
		{name: "one block of 2", cols: 2, block: 2},
		{name: "three blocks of 4", cols: 12, block: 4},
		{name: "signs before", cols: 64, block: 16, signs: true},
		{name: "signs after", cols: 64, block: 16, signs: true, after: true},
		{name: "in place", cols: 64, block: 32, signs: true, inPlace: true},
		{name: "bonsai-2 width", cols: 5120, block: 1024, signs: true},
		// 6 heads of 4 over 2 key heads (rep 3), blocks of 8: P moves
		// values across blocks.
		{name: "regroup", cols: 24, block: 8, signs: true, regroup: infer.HeadOrder{HeadDim: 4, KHeads: 2}},
		{name: "regroup in place", cols: 24, block: 8, signs: true, regroup: infer.HeadOrder{HeadDim: 4, KHeads: 2}, inPlace: true},
		{name: "regroup, heads across blocks", cols: 96, block: 16, regroup: infer.HeadOrder{HeadDim: 32, KHeads: 1}},
		{name: "regroup 16 key heads ×3", cols: 6144, block: 1024, signs: true, regroup: infer.HeadOrder{HeadDim: 128, KHeads: 16}, inPlace: true},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const rows, active = 3, 2
			x := make([]float32, rows*c.cols)
			for j := range x {
				x[j] = float32(rng.NormFloat64())
			}
			r := infer.Rotation{Block: c.block, SignsAfter: c.after, Regroup: c.regroup}
			var s []float32
			if c.signs {
				s = randomSigns(rng, c.cols)
				w, err := b.LoadWeight(infer.WeightData{Name: fmt.Sprintf("signs.%d", i), Type: gguf.F32, Shape: []int64{int64(c.cols)}, Data: f32Bytes(s)})
				if err != nil {
					t.Fatal(err)
				}
				r.Signs = w
			}
			got, err := hadamardPass(t, b, x, rows, active, r, c.inPlace)
			if err != nil {
				t.Fatal(err)
			}
			for row := range rows {
				in, out := x[row*c.cols:(row+1)*c.cols], got[row*c.cols:(row+1)*c.cols]
				if row >= active {
					want := in
					if !c.inPlace {
						want = make([]float32, c.cols)
					}
					for j := range out {
						if out[j] != want[j] {
							t.Fatalf("inactive row %d col %d changed: %g, was %g", row, j, out[j], want[j])
						}
					}
					continue
				}
				want := hadamardRef(in, c.block, s, c.after, c.regroup)
				// f32 butterflies: log₂(block) roundings of values of
				// the order of the row's norm.
				tol := 4e-7 * float64(bits.Len(uint(c.block))) * math.Sqrt(float64(c.block))
				for j := range out {
					if d := math.Abs(float64(out[j]) - want[j]); d > tol {
						t.Fatalf("row %d col %d: %g, reference %g (diff %.3g > %.3g)", row, j, out[j], want[j], d, tol)
					}
				}
			}
		})
	}
}

// The transform is orthogonal and involutive, and the rotation after an
// embedding lookup (signs after) undoes the one before a matmul (signs
// before): s ⊙ H(H(s ⊙ x)) = x, which is what lets Bonsai 2 fold H into
// both sides.
func TestHadamardInvolutiveOrthogonal(t *testing.T) {
	b, err := New(infer.BackendOptions{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const cols, block = 2048, 1024
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, cols)
	for j := range x {
		x[j] = float32(rng.NormFloat64())
	}
	s := randomSigns(rng, cols)
	w, err := b.LoadWeight(infer.WeightData{Name: "signs", Type: gguf.F32, Shape: []int64{cols}, Data: f32Bytes(s)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		first, then infer.Rotation
	}{
		{"H·H", infer.Rotation{Block: block}, infer.Rotation{Block: block}},
		{"inverse of the signed rotation", infer.Rotation{Block: block, Signs: w}, infer.Rotation{Block: block, Signs: w, SignsAfter: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			y, err := hadamardPass(t, b, x, 1, 1, c.first, false)
			if err != nil {
				t.Fatal(err)
			}
			var nx, ny float64
			for j := range x {
				nx += float64(x[j]) * float64(x[j])
				ny += float64(y[j]) * float64(y[j])
			}
			if math.Abs(nx-ny) > 1e-5*nx {
				t.Errorf("|x|² = %g, |Hx|² = %g: not orthogonal", nx, ny)
			}
			z, err := hadamardPass(t, b, y, 1, 1, c.then, true)
			if err != nil {
				t.Fatal(err)
			}
			for j := range x {
				if d := math.Abs(float64(z[j] - x[j])); d > 1e-5 {
					t.Fatalf("col %d: %g after both, was %g", j, z[j], x[j])
				}
			}
		})
	}
}

func TestHadamardRefusesBadOperands(t *testing.T) {
	b, err := New(infer.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	short, err := b.LoadWeight(infer.WeightData{Name: "short", Type: gguf.F32, Shape: []int64{8}, Data: f32Bytes(make([]float32, 8))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    infer.Rotation
	}{
		{"block not a power of two", infer.Rotation{Block: 12}},
		{"zero block", infer.Rotation{}},
		{"width not a multiple of the block", infer.Rotation{Block: 32}},
		{"signs of the wrong length", infer.Rotation{Block: 8, Signs: short}},
		{"heads that do not fit", infer.Rotation{Block: 8, Regroup: infer.HeadOrder{HeadDim: 5, KHeads: 2}}},
		{"no key heads", infer.Rotation{Block: 8, Regroup: infer.HeadOrder{HeadDim: 4}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := hadamardPass(t, b, make([]float32, 24), 1, 1, c.r, false)
			if !errors.Is(err, infer.ErrBadShape) {
				t.Fatalf("got %v, want ErrBadShape", err)
			}
		})
	}
}
