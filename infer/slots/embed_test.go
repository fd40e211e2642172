package slots_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// Embed is the mean of Model.Hidden's rows, run in passes of the batch
// beside a generation that keeps its tokens; a cancelled one ends with the
// context's error, and a refused one says why.
func TestEmbed(t *testing.T) {
	s, m := start(t, 2, 96)
	tokens := make([]int32, 70) // three passes of 32
	for i := range tokens {
		tokens[i] = int32(i*13%90 + 1)
	}
	alone, err := slots.Greedy(m, []int32{5, 6, 7}, 20, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Submit(context.Background(), slots.Request{Prompt: []int32{5, 6, 7}, MaxTokens: 20, Params: sample.Params{Temperature: 0}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Embed(context.Background(), tokens)
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := drain(st); !slices.Equal(ids, alone) {
		t.Errorf("beside an embedding: %v, alone %v", ids, alone)
	}

	E := m.Hparams.Embed
	want := make([]float64, E)
	rows := make([]float32, 32*E)
	for start := 0; start < len(tokens); start += 32 {
		chunk := tokens[start:min(start+32, len(tokens))]
		if err := m.Hidden(chunk, start, 0, 0, rows); err != nil {
			t.Fatal(err)
		}
		for i := range chunk {
			for c := range E {
				want[c] += float64(rows[i*E+c]) / float64(len(tokens))
			}
		}
	}
	if len(got) != E {
		t.Fatalf("%d values, want %d", len(got), E)
	}
	worst := 0.0
	for c := range E {
		worst = math.Max(worst, math.Abs(float64(got[c])-want[c]))
	}
	if worst > 1e-4 {
		t.Errorf("%.3g from the mean of Hidden's rows", worst)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Embed(ctx, tokens); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for name, toks := range map[string][]int32{"none": nil, "over a slot": make([]int32, 97), "outside the vocabulary": {-1}} {
		if _, err := s.Embed(context.Background(), toks); !errors.Is(err, infer.ErrBadShape) && !errors.Is(err, slots.ErrPromptTooLong) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
