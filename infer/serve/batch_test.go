package serve_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	_ "github.com/bonsai-chat/bonsai/infer/gpu" // registers the "gpu" backend
	"github.com/bonsai-chat/bonsai/infer/serve"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// synthFile writes synth's tiny model of arch (the real Qwen vocabulary,
// so the chat template works) in Q1_0, rotated as Bonsai 2 is with
// rotated, and opens it.
func synthFile(t *testing.T, arch string, rotated bool) *gguf.File {
	t.Helper()
	s, err := synth.ArchShape(arch, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, arch+".gguf")
	o := synth.Options{Shape: s, Type: gguf.Q1_0, Seed: 11}
	if rotated {
		s.Tied = false
		o.Shape = s
		err = synth.WriteRotated(path, filepath.Join(dir, "twin.gguf"), synth.RotatedOptions{Options: o, Block: 128})
	} else {
		err = synth.Write(path, o)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestParallelMatchesRun sends four requests at once to a server of four
// slots, which decodes them in one batch (no "one slot" note), on every
// architecture that batches on the CPU: each reply is the one the engine
// behind the chat and `bonsai run` gives for the same messages and
// sampling, greedy and seeded.
func TestParallelMatchesRun(t *testing.T) {
	parallelMatchesRun(t, "cpu", []parallelModel{
		{"qwen3", func(t *testing.T) *gguf.File { return testFile(t) }},
		{"qwen3-rotated", func(t *testing.T) *gguf.File { return synthFile(t, "qwen3", true) }},
		{"qwen35", func(t *testing.T) *gguf.File { return synthFile(t, "qwen35", false) }},
	})
}

// TestParallelMatchesRunGPU is TestParallelMatchesRun on the GPU (lavapipe
// where there is no other), against the engine on the GPU: a reply's
// tokens do not depend on what else the batch holds.
func TestParallelMatchesRunGPU(t *testing.T) {
	parallelMatchesRun(t, "gpu", []parallelModel{
		{"qwen3", func(t *testing.T) *gguf.File { return testFile(t) }},
		{"qwen3-rotated", func(t *testing.T) *gguf.File { return synthFile(t, "qwen3", true) }},
		{"qwen35", func(t *testing.T) *gguf.File { return synthFile(t, "qwen35", false) }},
	})
}

// parallelModel is a model TestParallelMatchesRun serves.
type parallelModel struct {
	name string
	file func(t *testing.T) *gguf.File
}

func parallelMatchesRun(t *testing.T, backend string, models []parallelModel) {
	prompts := []string{"One", "Two words", "A longer prompt of several words", "Four"}
	const maxTokens = 16
	for _, mc := range models {
		t.Run(mc.name, func(t *testing.T) {
			f := mc.file(t)
			s := startServerOn(t, f, serve.Options{}, serve.LoadOptions{ID: testModel, Slots: 4, Context: 384, Threads: 2, Batch: 64, Backend: backend, GPU: infer.GPUOptions{AllowSoftware: true}})
			if notes := s.model.Notes; len(notes) > 0 {
				t.Fatalf("notes: %q", notes)
			}
			c := s.client()
			sampling := func(i int) engine.Sampling {
				if i%2 == 0 {
					return engine.Sampling{Temperature: 0, RepeatPenalty: 1}
				}
				return engine.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, Seed: uint64(100 + i)}
			}
			got := make([]string, len(prompts))
			errs := make([]error, len(prompts))
			var wg sync.WaitGroup
			for i, p := range prompts {
				wg.Go(func() {
					sp := sampling(i)
					params := oai.ChatCompletionNewParams{Model: testModel, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(p)},
						Temperature: oai.Float(float64(sp.Temperature)), MaxTokens: oai.Int(maxTokens)}
					var opts []option.RequestOption
					if sp.Temperature > 0 {
						params.TopP, params.Seed = oai.Float(float64(sp.TopP)), oai.Int(int64(sp.Seed))
						opts = append(opts, option.WithJSONSet("top_k", sp.TopK), option.WithJSONSet("min_p", sp.MinP))
					}
					r, err := c.Chat.Completions.New(context.Background(), params, opts...)
					if err != nil {
						errs[i] = err
						return
					}
					got[i] = r.Choices[0].Message.Content
				})
			}
			wg.Wait()
			for i, p := range prompts {
				if errs[i] != nil {
					t.Fatalf("%q: %v", p, errs[i])
				}
				want := engineSampledOn(t, f, backend, []chat.Message{{Role: "user", Content: p}}, maxTokens, sampling(i))
				if got[i] != want || want == "" {
					t.Errorf("%q (%s): batched %q, run %q", p, fmt.Sprint(sampling(i)), got[i], want)
				}
			}
			if sc := s.model.Sched; !sc.Batched() || sc.Slots() != 4 {
				t.Errorf("%d slots, batched %v: the server does not decode the four together", sc.Slots(), sc.Batched())
			}
		})
	}
}
