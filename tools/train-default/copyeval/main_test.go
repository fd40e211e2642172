package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
)

// TestEvaluate scores the embedded model on answers known from
// reference.json: its own greedy reply to a prompt (an exact copy), the same
// reply with one token changed (right up to that token), and a reply to
// another prompt (wrong from the first token).
func TestEvaluate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the model on the CPU")
	}
	data, err := os.ReadFile("../../../infer/defaultmodel/testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Greedy []struct {
			Prompt []int32 `json:"prompt_ids"`
			IDs    []int32 `json:"greedy_ids"`
		} `json:"greedy"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	var done []int // prompts whose reference reply reached the end of the turn
	for i, g := range ref.Greedy {
		if n := len(g.IDs); n > 4 && g.IDs[n-1] == 151645 {
			done = append(done, i)
		}
	}
	if len(done) < 2 {
		t.Fatalf("reference.json has %d replies that end their turn, need 2", len(done))
	}
	a, b := ref.Greedy[done[0]], ref.Greedy[done[1]]
	changed := append([]int32(nil), a.IDs...)
	changed[3]++
	f, err := defaultmodel.Open()
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, err := evaluate(m, []task{
		{Kind: "same", Prompt: a.Prompt, Want: [][]int32{b.IDs, a.IDs}},
		{Kind: "changed", Prompt: a.Prompt, Want: [][]int32{changed}},
		{Kind: "other", Prompt: a.Prompt, Want: [][]int32{b.IDs}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]tally{
		"same":    {n: 1, exact: 1, prefix: len(a.IDs), answer: len(a.IDs)},
		"changed": {n: 1, exact: 0, prefix: 3, answer: len(a.IDs)},
		"other":   {n: 1, exact: 0, prefix: 0, answer: len(b.IDs)},
	} {
		if g := got[kind]; g == nil || *g != want {
			t.Errorf("%s: %+v, want %+v", kind, g, want)
		}
	}
}
