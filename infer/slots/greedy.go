package slots

import (
	"context"
	"fmt"

	"github.com/bonsai-chat/bonsai/infer"
)

// Greedy runs prompt from position 0 through a one-slot scheduler of its
// own (Options.Forward, as a chat's) and returns the n greedy tokens that
// follow (argmax, the first on ties, as llama.cpp's greedy sampler): the
// reference continuation parity tests compare. With chained, the steps run
// chained where the model can chain them (chain.go); without, plainly.
// The model must not be in use by another scheduler meanwhile.
func Greedy(m *infer.Model, prompt []int32, n int, chained bool) ([]int32, error) {
	if n < 1 {
		return nil, nil
	}
	if len(prompt)+n-1 > m.Context() {
		return nil, fmt.Errorf("%w: %d tokens after a prompt of %d exceed the context of %d", infer.ErrContextFull, n, len(prompt), m.Context())
	}
	s, err := New(Options{Model: m, Slots: 1, Context: m.Context(), Forward: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st, err := s.Submit(context.Background(), Request{
		Prompt: prompt, MaxTokens: n,
		Chain: func() bool { return chained },
	})
	if err != nil {
		return nil, err
	}
	out, res := st.Collect()
	if res.Err != nil {
		return out, res.Err
	}
	if len(out) < n {
		return out, fmt.Errorf("%w: %d of %d tokens", infer.ErrContextFull, len(out), n)
	}
	return out, nil
}
