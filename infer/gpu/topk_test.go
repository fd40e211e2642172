package gpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/sample"
)

// refTopK is the k best of row by a full stable sort under float
// comparison: logit descending, lower id first on ties, −0 equal to +0.
func refTopK(row []float32, k int) []int32 {
	ids := make([]int32, len(row))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortStableFunc(ids, func(a, b int32) int { return cmp.Compare(row[b], row[a]) })
	out := make([]int32, 0, 2*k)
	for _, id := range ids[:k] {
		out = append(out, id, int32(math.Float32bits(row[id])))
	}
	return out
}

// TestTopKMatchesSort runs topk.wgsl's passes on the last row of a
// two-row tensor against a full sort: vocabularies below, at and past one
// workgroup's sort, not multiples of it, with more or fewer lists than k;
// values with many ties and zeros of both signs (the logit bits must come
// back as they are). A NaN anywhere must come out first.
func TestTopKMatchesSort(t *testing.T) {
	b := newTestBackend(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ cols, k int }{
		{5, 1}, {96, 20}, {96, 64}, {1000, 20}, {1024, 64}, {1025, 1}, {1025, 64},
		{3000, 64}, {5000, 20}, {70001, 64}, {70001, 1}, {151936, 20}, {2049, 3},
	} {
		t.Run(fmt.Sprintf("%d_k%d", c.cols, c.k), func(t *testing.T) {
			x := b.mustTensor(t, "x", 2, c.cols)
			vals := make([]float32, 2*c.cols)
			for i := range vals {
				vals[i] = float32(r.IntN(61)-30) / 8
				if vals[i] == 0 && r.IntN(2) == 0 {
					vals[i] = float32(math.Copysign(0, -1))
				}
			}
			// the first row holds the largest values: it must be ignored
			for i := range c.cols {
				vals[i] = 100
			}
			b.write(t, x, vals)
			got := make([]int32, 2*c.k)
			b.Begin(batchOf(2, 0))
			b.TopK(x, c.k, got)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if want := refTopK(vals[c.cols:], c.k); !slices.Equal(got, want) {
				t.Fatalf("top-%d of %d\n%v\nwant\n%v", c.k, c.cols, got, want)
			}
			vals[c.cols+r.IntN(c.cols)] = float32(math.NaN())
			b.write(t, x, vals)
			b.Begin(batchOf(2, 0))
			b.TopK(x, c.k, got)
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if v := math.Float32frombits(uint32(got[1])); !math.IsNaN(float64(v)) {
				t.Fatalf("a row with a NaN: first candidate %d (%v)", got[0], v)
			}
		})
	}
}

// TestChainPickGetsCandidates runs chained passes of nothing but a top-k
// over a written row: the next pass's pick must get the previous pass's
// candidates, or, when the row holds a NaN, no candidates and the whole
// row; a token out of the vocabulary fails the Commit.
func TestChainPickGetsCandidates(t *testing.T) {
	b := newTestBackend(t)
	const cols, k = 3000, 20
	x := b.mustTensor(t, "x", 1, cols)
	r := rand.New(rand.NewPCG(5, 6))
	vals := make([]float32, cols)
	for i := range vals {
		vals[i] = float32(r.IntN(200)) / 16
	}
	var gotTop []int32
	var gotRow []float32
	pick := func(top []sample.Logit, row []float32) (int32, error) {
		gotTop, gotRow = nil, row
		for _, c := range top {
			gotTop = append(gotTop, c.ID, int32(math.Float32bits(c.Logit)))
		}
		return 7, nil
	}
	pass := func(picks bool) error {
		if picks {
			b.ChainPick(pick)
		}
		b.Begin(batchOf(1, 0))
		b.ChainTopK(x, k)
		return b.Commit()
	}
	if err := b.SetChained(true); err != nil {
		t.Fatal(err)
	}
	b.write(t, x, vals)
	if err := pass(false); err != nil {
		t.Fatal(err)
	}
	want := refTopK(vals, k)
	vals[1234] = float32(math.NaN())
	b.write(t, x, vals) // ordered after the first pass, before the second
	if err := pass(true); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gotTop, want) || gotRow != nil {
		t.Fatalf("pick got %v (row %v), want %v", gotTop, gotRow != nil, want)
	}
	if err := pass(true); err != nil {
		t.Fatal(err)
	}
	if gotTop != nil || len(gotRow) != cols || !math.IsNaN(float64(gotRow[1234])) || gotRow[5] != vals[5] {
		t.Fatalf("a row with a NaN: pick got candidates %v, a row of %d", gotTop, len(gotRow))
	}
	b.ChainPick(func([]sample.Logit, []float32) (int32, error) { return cols, nil })
	b.Begin(batchOf(1, 0))
	b.ChainTopK(x, k)
	if err := b.Commit(); err == nil {
		t.Fatal("a picked token past the vocabulary did not fail")
	}
	if err := b.SetChained(false); err != nil {
		t.Fatal(err)
	}
}
