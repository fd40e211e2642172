package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
)

// randMatrix quantizes a random rows × cols matrix to typ.
func randMatrix(t testing.TB, r *rand.Rand, typ gguf.Type, rows, cols int) *Matrix {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, rows*int(rb))
	for i := 0; i < rows; i++ {
		x := make([]float32, cols)
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		if err := QuantizeRow(typ, x, data[i*int(rb):(i+1)*int(rb)]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMatMulMatchesDot checks every (type, shape, threads) product against
// Dot row by row. Odd row counts (not multiples of the kernels' row groups)
// and token counts (not multiples of the token tiles) are included.
func TestMatMulMatchesDot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range weightTypes {
		for _, shape := range []struct{ rows, cols, tokens int }{{1, 256, 1}, {37, 512, 1}, {67, 256, 5}, {130, 768, 70}} {
			if shape.cols%typ.BlockSize() != 0 {
				continue
			}
			m := randMatrix(t, r, typ, shape.rows, shape.cols)
			x := randVec(r, shape.cols*shape.tokens)
			for _, threads := range []int{1, 3} {
				p := NewPool(threads)
				var a Activations
				if err := p.Quantize(&a, typ, x, shape.cols, shape.tokens); err != nil {
					t.Fatal(err)
				}
				y := make([]float32, shape.rows*shape.tokens)
				if err := p.MatMul(m, &a, y); err != nil {
					t.Fatal(err)
				}
				for tok := 0; tok < shape.tokens; tok++ {
					for row := 0; row < shape.rows; row++ {
						want := Dot(typ, shape.cols, m.Row(row), a.Token(tok))
						got := y[tok*shape.rows+row]
						if !closeTo(got, want, shape.cols) {
							t.Fatalf("%s %v threads %d: y[%d][%d] = %v, Dot = %v", typ, shape, threads, tok, row, got, want)
						}
					}
				}
				p.Close()
			}
		}
	}
}

// closeTo allows SIMD kernels a different float summation order than the
// portable Dot: a few ulps of the result per block, relative to the
// magnitude of the terms (bounded here by √n·max|y| for Gaussian data; in
// practice SIMD and portable agree to ~1e-6 relative).
func closeTo(got, want float32, n int) bool {
	diff := math.Abs(float64(got - want))
	return diff <= 1e-5*math.Max(1, math.Abs(float64(want)))*math.Sqrt(float64(n)/32)
}

func TestMatVecAllocatesNothing(t *testing.T) {
	defer SetFeatures(FeaturesAll)
	for _, f := range []Features{FeaturesAll, FeaturesAVX2, FeaturesPortable} {
		if SetFeatures(f) != nil {
			continue // no AVX2 here
		}
		matVecAllocatesNothing(t, f)
	}
}

func matVecAllocatesNothing(t *testing.T, f Features) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []gguf.Type{gguf.Q1_0, gguf.Q4_K, gguf.F16} {
		m := randMatrix(t, r, typ, 64, 512)
		x := randVec(r, 512)
		y := make([]float32, 64)
		p := NewPool(2)
		var a Activations
		if err := p.Quantize(&a, typ, x, 512, 1); err != nil { // first call sizes the buffers
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if err := p.Quantize(&a, typ, x, 512, 1); err != nil {
				t.Fatal(err)
			}
			if err := p.MatVec(m, &a, y); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %s: %v allocations per token", f, typ, allocs)
		}
		p.Close()
	}
}

func TestProductErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	m := randMatrix(t, r, gguf.Q1_0, 8, 256)
	p := NewPool(1)
	defer p.Close()
	var a Activations
	if err := p.Quantize(&a, gguf.Q1_0, make([]float32, 128), 128, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.MatVec(m, &a, make([]float32, 8)); err == nil {
		t.Error("128 activations against 256 columns: no error")
	}
	if err := p.Quantize(&a, gguf.Q1_0, make([]float32, 256), 256, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.MatVec(m, &a, make([]float32, 7)); err == nil {
		t.Error("7 outputs for 8 rows: no error")
	}
	if _, err := NewMatrix(gguf.Q1_0, 8, 256, make([]byte, 100)); err == nil {
		t.Error("short matrix data: no error")
	}
	if _, err := NewMatrix(gguf.Q8_K, 1, 256, make([]byte, 292)); err == nil {
		t.Error("Q8_K weights: no error")
	}
}

// TestMatMulsMatchesMatMul checks that products sharing one dispatch give
// exactly what MatMul gives each alone (the same kernels over the same
// tiles), including more products than one dispatch carries, and that a bad
// product is reported.
func TestMatMulsMatchesMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const cols = 512
	for _, tokens := range []int{1, 3, 70} {
		for _, count := range []int{1, 2, 3, maxShared + 1} {
			x := randVec(r, cols*tokens)
			p := NewPool(3)
			var a Activations
			if err := p.Quantize(&a, gguf.Q1_0, x, cols, tokens); err != nil {
				t.Fatal(err)
			}
			ps := make([]Product, count)
			want := make([][]float32, count)
			for i := range ps {
				rows := 16 + 37*i
				ps[i] = Product{M: randMatrix(t, r, gguf.Q1_0, rows, cols), Y: make([]float32, rows*tokens)}
				want[i] = make([]float32, rows*tokens)
				if err := p.MatMul(ps[i].M, &a, want[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.MatMuls(ps, &a); err != nil {
				t.Fatal(err)
			}
			for i := range ps {
				for j, w := range want[i] {
					if ps[i].Y[j] != w {
						t.Fatalf("tokens %d, %d products: product %d y[%d] = %v, MatMul %v", tokens, count, i, j, ps[i].Y[j], w)
					}
				}
			}
			ps[count-1].Y = ps[count-1].Y[1:]
			if err := p.MatMuls(ps, &a); err == nil {
				t.Errorf("tokens %d, %d products: short output, no error", tokens, count)
			}
			p.Close()
		}
	}
}

// TestQ4_KGemmTokens: a Q4_K product rounds as llama.cpp's repacked gemm
// (dotQ4_KGemm) for the tokens in whole groups of 4 and as its gemv
// (dotQ4_K) for the rest, and only for matrices llama.cpp repacks (rows a
// multiple of 8); MatMul follows the rule whatever kernel this CPU runs.
func TestQ4_KGemmTokens(t *testing.T) {
	for _, tc := range []struct {
		typ          gguf.Type
		rows, tokens int
		gemm         int
	}{
		{gguf.Q4_K, 8, 1, 0}, {gguf.Q4_K, 8, 3, 0}, {gguf.Q4_K, 8, 4, 4}, {gguf.Q4_K, 16, 10, 8},
		{gguf.Q4_K, 24, 13, 12}, {gguf.Q4_K, 12, 10, 0}, {gguf.Q4_K, 5, 8, 0},
		{gguf.Q5_K, 16, 10, 0}, {gguf.Q6_K, 16, 10, 0}, {gguf.Q8_0, 16, 10, 0},
	} {
		r := rand.New(rand.NewPCG(uint64(tc.rows), uint64(tc.tokens)))
		const cols = 1024
		w := randVec(r, tc.rows*cols)
		data := make([]byte, 0, tc.rows*cols)
		for row := 0; row < tc.rows; row++ {
			rb, err := rowBytes(tc.typ, cols)
			if err != nil {
				t.Fatal(err)
			}
			q := make([]byte, rb)
			if err := QuantizeRow(tc.typ, w[row*cols:(row+1)*cols], q); err != nil {
				t.Fatal(err)
			}
			data = append(data, q...)
		}
		m, err := NewMatrix(tc.typ, tc.rows, cols, data)
		if err != nil {
			t.Fatal(err)
		}
		if g := m.gemmTokens(tc.tokens); g != tc.gemm {
			t.Errorf("%s %d rows, %d tokens: gemmTokens = %d, want %d", tc.typ, tc.rows, tc.tokens, g, tc.gemm)
		}
		if tc.typ != gguf.Q4_K {
			continue
		}
		p := NewPool(2)
		var a Activations
		if err := p.Quantize(&a, tc.typ, randVec(r, cols*tc.tokens), cols, tc.tokens); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, tc.rows*tc.tokens)
		if err := p.MatMul(m, &a, y); err != nil {
			t.Fatal(err)
		}
		p.Close()
		differ := 0
		for tok := 0; tok < tc.tokens; tok++ {
			for row := 0; row < tc.rows; row++ {
				gemv, gemm := dotQ4_K(cols, m.Row(row), a.Token(tok)), dotQ4_KGemm(cols, m.Row(row), a.Token(tok))
				want := gemv
				if tok < tc.gemm {
					want = gemm
				}
				if gemv != gemm {
					differ++
				}
				if got := y[tok*tc.rows+row]; math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%d rows, %d tokens: y[token %d, row %d] = %v, want %v (gemm %v, gemv %v)", tc.rows, tc.tokens, tok, row, got, want, gemm, gemv)
				}
			}
		}
		if tc.gemm > 0 && differ == 0 {
			t.Errorf("%d rows, %d tokens: the gemm and gemv orders never differ, so the test cannot tell them apart", tc.rows, tc.tokens)
		}
	}
}
