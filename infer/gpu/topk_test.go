package gpu

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
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
