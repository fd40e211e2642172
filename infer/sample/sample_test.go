package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGreedy(t *testing.T) {
	tests := []struct {
		logits []float32
		want   int32
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{5, 5, 1}, 0}, // first on ties, as llama.cpp
		{[]float32{-3, -1, -2}, 1},
		{[]float32{0}, 0},
	}
	for _, tc := range tests {
		if got := Greedy(tc.logits); got != tc.want {
			t.Errorf("Greedy(%v) = %d, want %d", tc.logits, got, tc.want)
		}
		s, _ := New(Params{})
		if got := s.Sample(tc.logits); got != tc.want {
			t.Errorf("temperature 0 Sample(%v) = %d, want %d", tc.logits, got, tc.want)
		}
	}
}

// draws samples n tokens and returns how often each came up.
func draws(t *testing.T, p Params, logits []float32, n int) []int {
	t.Helper()
	s, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, len(logits))
	for range n {
		counts[s.Sample(logits)]++
	}
	return counts
}

func TestStagesKeepTheRightTokens(t *testing.T) {
	// Probabilities at temperature 1: 0.5, 0.25, 0.125, 0.0625, 0.0625.
	l := func(p float64) float32 { return float32(math.Log(p)) }
	logits := []float32{l(0.5), l(0.25), l(0.125), l(0.0625), l(0.0625)}
	tests := []struct {
		name string
		p    Params
		can  []bool // which tokens may be drawn
	}{
		{"all", Params{Temperature: 1}, []bool{true, true, true, true, true}},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, []bool{true, true, false, false, false}},
		{"top-k 1 is greedy", Params{Temperature: 1, TopK: 1}, []bool{true, false, false, false, false}},
		{"top-p 0.7 needs two", Params{Temperature: 1, TopP: 0.7}, []bool{true, true, false, false, false}},
		{"top-p 0.75 reaches exactly two", Params{Temperature: 1, TopP: 0.75}, []bool{true, true, false, false, false}},
		{"top-p 0.8 needs three", Params{Temperature: 1, TopP: 0.8}, []bool{true, true, true, false, false}},
		{"min-p 0.2 keeps p ≥ 0.1", Params{Temperature: 1, MinP: 0.2}, []bool{true, true, true, false, false}},
		{"min-p 0.6 keeps the top", Params{Temperature: 1, MinP: 0.6}, []bool{true, false, false, false, false}},
		{"top-k then top-p", Params{Temperature: 1, TopK: 3, TopP: 0.6}, []bool{true, true, false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			counts := draws(t, tc.p, logits, 4000)
			for i, c := range counts {
				if tc.can[i] && c == 0 {
					t.Errorf("token %d never drawn: %v", i, counts)
				}
				if !tc.can[i] && c != 0 {
					t.Errorf("token %d drawn %d times: %v", i, c, counts)
				}
			}
		})
	}
}

func TestDrawFollowsSoftmax(t *testing.T) {
	logits := []float32{2, 1, 0, -1}
	const n = 40000
	for _, temp := range []float32{0.5, 1, 2} {
		counts := draws(t, Params{Temperature: temp, Seed: 7}, logits, n)
		var z float64
		for _, l := range logits {
			z += math.Exp(float64(l / temp))
		}
		for i, l := range logits {
			want := math.Exp(float64(l/temp)) / z
			got := float64(counts[i]) / n
			// 5 standard deviations of a binomial proportion.
			if tol := 5 * math.Sqrt(want*(1-want)/n); math.Abs(got-want) > tol {
				t.Errorf("temperature %v: token %d drawn %.4f of the time, want %.4f", temp, i, got, want)
			}
		}
	}
}

func TestSeedIsDeterministic(t *testing.T) {
	logits := []float32{1, 1.1, 0.9, 1.05, 0.2}
	p := Params{Temperature: 1, Seed: 42}
	a, b := draws(t, p, logits, 200), draws(t, p, logits, 200)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different draws: %v vs %v", a, b)
		}
	}
	p.Seed = 43
	c := draws(t, p, logits, 200)
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Errorf("seeds 42 and 43 drew identically: %v", a)
	}
}

func TestRepeatPenalty(t *testing.T) {
	s, err := New(Params{RepeatPenalty: 2, RepeatLastN: 2})
	if err != nil {
		t.Fatal(err)
	}
	logits := []float32{3, 2, -1}
	s.Accept(0) // 3 → 1.5: token 1 (2) wins
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("after penalizing token 0, greedy = %d, want 1", got)
	}
	s.Accept(1)
	s.Accept(1) // window of 2 now holds 1, 1: token 0 is back to 3
	if got := s.Sample(logits); got != 0 {
		t.Fatalf("token 0 left the window, greedy = %d, want 0", got)
	}
	// Negative logits get more negative.
	s2, _ := New(Params{RepeatPenalty: 2, RepeatLastN: 4})
	s2.Accept(0)
	if got := s2.Sample([]float32{-1, -1.5}); got != 1 {
		t.Fatalf("penalized negative logit: greedy = %d, want 1", got)
	}
	if logits[0] != 3 {
		t.Fatalf("Sample modified its input: %v", logits)
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Params{
		{Temperature: -1}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}, {RepeatPenalty: -1}, {RepeatLastN: -2},
		{Temperature: float32(math.NaN())},
	} {
		if _, err := New(p); err == nil {
			t.Errorf("New(%+v) accepted invalid parameters", p)
		}
	}
	if _, err := New(Bonsai(1)); err != nil {
		t.Errorf("Bonsai defaults rejected: %v", err)
	}
}

func TestTop(t *testing.T) {
	got := Top([]float32{0.5, 3, -1, 2, 3}, 3, nil)
	want := []Logit{{1, 3}, {4, 3}, {3, 2}}
	if len(got) != len(want) {
		t.Fatalf("Top = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Top = %v, want %v", got, want)
		}
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	s, _ := New(Params{Temperature: 0.5, TopK: 20, TopP: 0.85, RepeatPenalty: 1.1, RepeatLastN: 64})
	s.Sample(logits)
	if a := testing.AllocsPerRun(10, func() { s.Accept(s.Sample(logits)) }); a != 0 {
		t.Errorf("Sample allocates %v times", a)
	}
}

// topCandidates must pick what penalizing every logit and sorting them all
// would, for penalties above and below 1 and with ties.
func TestTopCandidatesMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 50 + rng.IntN(500)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rng.IntN(40)-20) / 4 // coarse: many ties
		}
		penalty := []float32{1.3, 0.7, 2}[trial%3]
		k := 1 + rng.IntN(30)
		s, err := New(Params{Temperature: 1, TopK: k, RepeatPenalty: penalty, RepeatLastN: 16})
		if err != nil {
			t.Fatal(err)
		}
		for range rng.IntN(40) {
			s.Accept(int32(rng.IntN(n)))
		}
		got := s.topCandidates(logits, k, true)

		want := make([]candidate, n)
		for i, l := range logits {
			want[i] = candidate{id: int32(i), logit: l}
		}
		s.penalize(want)
		slices.SortFunc(want, byLogit)
		want = want[:k]
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d candidates, want %d", trial, len(got), len(want))
		}
		for i := range want {
			if got[i].id != want[i].id || got[i].logit != want[i].logit {
				t.Fatalf("trial %d (k %d, penalty %v): candidate %d is %+v, want %+v", trial, k, penalty, i, got[i], want[i])
			}
		}
	}
}

// Dist is the distribution Sample draws from: with one seed, Pick over
// Dist with the sampler's next number is Sample's token, stage by stage.
func TestDistIsSamplesDistribution(t *testing.T) {
	logits := make([]float32, 400)
	for i := range logits {
		logits[i] = float32((i*7919)%113) / 17
	}
	for _, p := range []Params{
		{Temperature: 0.7},
		{Temperature: 1, TopK: 20},
		{Temperature: 0.5, TopK: 20, TopP: 0.85},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.3, RepeatLastN: 8},
		{Temperature: 0, RepeatPenalty: 1.5, RepeatLastN: 4},
	} {
		a, _ := New(p)
		b, _ := New(p)
		for i := range 200 {
			id := a.Sample(logits)
			d := b.Dist(logits, nil)
			got := d[0].ID
			if p.Temperature > 0 {
				got = Pick(d, b.Float64())
			}
			if got != id {
				t.Fatalf("%+v step %d: Pick(Dist) = %d, Sample = %d", p, i, got, id)
			}
			var sum float64
			for _, x := range d {
				sum += float64(x.P)
			}
			if sum < 0.999 || sum > 1.001 {
				t.Fatalf("%+v: Dist sums to %v", p, sum)
			}
			a.Accept(id)
			b.Accept(id)
		}
	}
}
