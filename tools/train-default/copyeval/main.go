// Command copyeval decodes the held-out copying tasks that
// tools/train-default/corpus writes (copyeval.json) greedily with bonsai's
// CPU backend and reports, per kind of task, how many replies are exact
// copies and how much of each right answer comes before the first wrong
// token:
//
//	go run ./tools/train-default/copyeval -tasks .carry/train-default/copyeval.json [-model M]
//
// Without -model it measures the embedded bonsai-tiny.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	_ "github.com/bonsai-chat/bonsai/infer/cpu"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

type task struct {
	Kind   string    `json:"kind"`
	Prompt []int32   `json:"prompt_ids"`
	Want   [][]int32 `json:"answer_ids"`
}

func main() {
	tasksPath := flag.String("tasks", ".carry/train-default/copyeval.json", "copyeval.json from tools/train-default/corpus")
	model := flag.String("model", "", "GGUF model (default: the embedded bonsai-tiny)")
	threads := flag.Int("threads", 0, "CPU threads (0: one per core)")
	flag.Parse()
	if err := run(*tasksPath, *model, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "copyeval:", err)
		os.Exit(1)
	}
}

func run(tasksPath, model string, threads int) error {
	data, err := os.ReadFile(tasksPath)
	if err != nil {
		return err
	}
	var tasks []task
	if err := json.Unmarshal(data, &tasks); err != nil {
		return fmt.Errorf("%s: %w", tasksPath, err)
	}
	var f *gguf.File
	if model == "" {
		f, err = defaultmodel.Open()
	} else {
		f, err = gguf.Open(model)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 1024, Threads: threads})
	if err != nil {
		return err
	}
	defer m.Close()

	byKind, err := evaluate(m, tasks)
	if err != nil {
		return err
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var all tally
	for _, k := range kinds {
		t := byKind[k]
		fmt.Printf("%-8s exact %3d/%-3d  right before the first wrong token %3.0f%%\n", k, t.exact, t.n, 100*float64(t.prefix)/float64(t.answer))
		all.n, all.exact, all.prefix, all.answer = all.n+t.n, all.exact+t.exact, all.prefix+t.prefix, all.answer+t.answer
	}
	fmt.Printf("%-8s exact %3d/%-3d (%.1f%%)  right before the first wrong token %3.0f%%\n", "all", all.exact, all.n,
		100*float64(all.exact)/float64(all.n), 100*float64(all.prefix)/float64(all.answer))
	return nil
}

// tally counts one kind's tasks, exact replies, and the answer tokens
// right before the first wrong one against the answers' lengths (for each
// task the right answer it follows longest).
type tally struct{ n, exact, prefix, answer int }

func evaluate(m *infer.Model, tasks []task) (map[string]*tally, error) {
	byKind := map[string]*tally{}
	for _, t := range tasks {
		longest := 0
		for _, w := range t.Want {
			longest = max(longest, len(w))
		}
		got, err := greedy(m, t.Prompt, min(longest+8, m.Context()-len(t.Prompt)))
		if err != nil {
			return nil, err
		}
		k := byKind[t.Kind]
		if k == nil {
			k = &tally{}
			byKind[t.Kind] = k
		}
		k.n++
		best, bestLen := -1, 0
		for _, w := range t.Want {
			if slices.Equal(got, w) {
				k.exact++
			}
			n := 0
			for n < len(w) && n < len(got) && w[n] == got[n] {
				n++
			}
			if n > best {
				best, bestLen = n, len(w)
			}
		}
		k.prefix += best
		k.answer += bestLen
	}
	return byKind, nil
}

// greedy decodes up to n tokens after prompt, stopping after an end of
// turn, through bonsai's decode loop: a one-slot scheduler run through
// Forward, as the chat's engine builds it.
func greedy(m *infer.Model, prompt []int32, n int) ([]int32, error) {
	s, err := slots.New(slots.Options{Model: m, Slots: 1, Context: m.Context(), Forward: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st, err := s.Submit(context.Background(), slots.Request{
		Prompt: prompt, MaxTokens: n,
		End: func(id int32) bool { return id == 151645 || id == 151643 }, // <|im_end|>, <|endoftext|>
	})
	if err != nil {
		return nil, err
	}
	out, res := st.Collect()
	return out, res.Err
}
