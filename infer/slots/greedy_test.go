package slots_test

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

// Greedy is the argmax continuation: each token the argmax of a full
// forward pass over the prompt and the tokens before it; on an attention
// model and on a recurrent one.
func TestGreedy(t *testing.T) {
	for _, toy := range []bool{false, true} {
		t.Run(map[bool]string{false: "attention", true: "recurrent"}[toy], func(t *testing.T) {
			greedyIsArgmax(t, loadModel(t, toy, 32))
		})
	}
}

func greedyIsArgmax(t *testing.T, m *infer.Model) {
	prompt := []int32{4, 8, 15, 16, 23, 42}
	got, err := slots.Greedy(m, prompt, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("Greedy returned %d tokens, want 5", len(got))
	}
	seq := append([]int32(nil), prompt...)
	for i, tok := range got {
		if err := m.Forward(seq, 0); err != nil {
			t.Fatal(err)
		}
		best := 0
		for j, l := range m.Logits() {
			if l > m.Logits()[best] {
				best = j
			}
		}
		if int32(best) != tok {
			t.Fatalf("step %d: Greedy gave %d, a full forward's argmax is %d", i, tok, best)
		}
		seq = append(seq, tok)
	}
	if _, err := slots.Greedy(m, prompt, 40, false); !errors.Is(err, infer.ErrContextFull) {
		t.Errorf("Greedy past the context: %v, want ErrContextFull", err)
	}
}
