package gpu_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/slots"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu"
)

// qwen35Prompt is a prompt for the tiny qwen35 model: long enough that
// its prefill runs the chunked delta rule, as TestQwen35GreedyMatchesCPU's.
func qwen35Prompt() []int32 {
	p := make([]int32, 40)
	for i := range p {
		p[i] = int32(1 + 7*i%1000)
	}
	return p
}

// The hybrid qwen35 network chains on the GPU: its DeltaNet and conv
// states ping-pong between buffer pairs in chained passes, so the pass in
// flight when a chain stops is taken back by swapping them. Greedy tokens
// through slots.Greedy chained are Greedy's, with the DeltaNet input stage
// fused (deltanet_in.wgsl) and as its ops (conv.wgsl).
func TestQwen35GreedyChainedMatchesGreedy(t *testing.T) {
	for _, unfused := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[unfused], func(t *testing.T) {
			plain, chained := loadQwen35(t, "gpu", gguf.Q1_0), loadQwen35(t, "gpu", gguf.Q1_0)
			if unfused {
				gpu.Unfuse(plain.Backend().(*gpu.Backend))
				gpu.Unfuse(chained.Backend().(*gpu.Backend))
			}
			if infer.NewSequence(chained).NewChain() == nil {
				t.Fatal("no chain on a Q1_0 qwen35 model on the GPU")
			}
			prompt := qwen35Prompt()
			want, err := slots.Greedy(plain, prompt, 24, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := slots.Greedy(chained, prompt, 24, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("chained greedy tokens\n%v\nwant\n%v", got, want)
			}
			if pos := chained.StatePos(); pos != len(prompt)+24-1 {
				t.Fatalf("after the chain the state is at %d, want %d (the last pass in flight)", pos, len(prompt)+24-1)
			}
		})
	}
}

// A chain on qwen35 stopped mid-reply and rewound one token (the pass in
// flight taken back on the device, not from a host snapshot) continues as
// if it had never chained, with the DeltaNet input stage fused and not;
// taking back a second time has nothing to take.
func TestQwen35ChainStopsAndRewinds(t *testing.T) {
	for _, unfused := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[unfused], func(t *testing.T) {
			m := loadQwen35(t, "gpu", gguf.Q1_0)
			if unfused {
				gpu.Unfuse(m.Backend().(*gpu.Backend))
			}
			prompt := qwen35Prompt()
			want, err := slots.Greedy(m, prompt, 16, false)
			if err != nil {
				t.Fatal(err)
			}
			s := infer.NewSequence(m)
			if _, err := s.Prefill(prompt, nil); err != nil {
				t.Fatal(err)
			}
			got := []int32{gpuArgmax(m.Logits())}
			c := s.NewChain()
			for len(got) < 6 {
				tok, err := c.Next(got[len(got)-1])
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, tok)
			}
			if _, inFlight, err := c.Stop(); err != nil || !inFlight {
				t.Fatalf("Stop: in flight %v, %v", inFlight, err)
			}
			// the cache holds the last token; plain decoding runs it next
			logits := slices.Clone(m.Logits())
			if err := s.Rewind(s.Len() - 1); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.Logits(), logits) {
				t.Fatal("Rewind ran tokens again: the pass in flight was not taken back on the device")
			}
			if err := m.Backend().(infer.ChainedRecurrent).StepBack(); !errors.Is(err, infer.ErrStateMismatch) {
				t.Fatalf("a second step back: %v, want ErrStateMismatch (Rewind did not take the pass back on the device)", err)
			}
			for len(got) < len(want) {
				if err := s.Append(got[len(got)-1]); err != nil {
					t.Fatal(err)
				}
				got = append(got, gpuArgmax(m.Logits()))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("tokens with a chain stopped at 6\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// gpuArgmax is the first largest logit's index.
func gpuArgmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}
