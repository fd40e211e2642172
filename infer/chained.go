package infer

import "fmt"

// GreedyChained is Greedy with the host off the critical path where the
// backend allows it (ChainedArgmax, on a Qwen3 network): each step's
// argmax stays on the device as the next step's token, and step t+1 is
// encoded and submitted while step t runs, its token read back meanwhile.
// The tokens are Greedy's (argmax, the first on ties); Logits is left as
// the prompt's. Elsewhere it is Greedy.
func (m *Model) GreedyChained(prompt []int32, n int) ([]int32, error) {
	cb, ok := m.backend.(ChainedArgmax)
	q, isQwen3 := m.net.(*qwen3)
	if !ok || !isQwen3 || m.Recurrent() || n < 2 || !cb.ChainEmbeds(q.embd) {
		return m.Greedy(prompt, n)
	}
	if len(prompt)+n-1 > m.context {
		return nil, fmt.Errorf("%w: %d tokens after a prompt of %d exceed the context of %d", ErrContextFull, n, len(prompt), m.context)
	}
	if _, err := NewSequence(m).Prefill(prompt, nil); err != nil {
		return nil, err
	}
	out := make([]int32, n)
	for i, l := range m.logits {
		if l > m.logits[out[0]] {
			out[0] = int32(i)
		}
	}
	if err := cb.SetChained(true); err != nil {
		return nil, err
	}
	var err error
	for i := 1; i < n && err == nil; i++ {
		if i > 1 {
			cb.ChainToken() // out[i-1], a placeholder here, is on the device
		}
		err = q.forwardArgmax(Batch{Tokens: out[i-1 : i], Pos: len(prompt) + i - 1}, out[i:i+1])
	}
	// the last step's token, and the pass in flight on an error
	if e := cb.SetChained(false); err == nil {
		err = e
	}
	if err != nil {
		return nil, fmt.Errorf("chained greedy decoding: %w", err)
	}
	return out, nil
}
