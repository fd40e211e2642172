package infer_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// A pass over rows of two sequences, each in its own region of the cache
// (and, for qwen35, its own recurrent state), gives each sequence the
// logits a pass of its own gives it: prefilling both at once, then
// decoding both at once, at different positions.
// Rotated weights (Bonsai 2's prism.hadamard.*) too.
func TestForwardRowsMatchesForward(t *testing.T) {
	files := map[string]func(t *testing.T) *gguf.File{
		"Q1_0":         func(t *testing.T) *gguf.File { return open(t, tinymodel.Small(gguf.Q1_0)) },
		"Q8_0":         func(t *testing.T) *gguf.File { return open(t, tinymodel.Small(gguf.Q8_0)) },
		"rotated-Q1_0": rotatedQwen3File,
		"qwen35-Q1_0":  func(t *testing.T) *gguf.File { return qwen35File(t, gguf.Q1_0) },
		"qwen35-Q8_0":  func(t *testing.T) *gguf.File { return qwen35File(t, gguf.Q8_0) },
		"llama-Q8_0":   func(t *testing.T) *gguf.File { return denseFile(t, "llama", gguf.Q8_0, nil) },
		"qwen2-Q8_0":   func(t *testing.T) *gguf.File { return denseFile(t, "qwen2", gguf.Q8_0, nil) },
	}
	for _, name := range []string{"Q1_0", "Q8_0", "rotated-Q1_0", "qwen35-Q1_0", "qwen35-Q8_0", "llama-Q8_0", "qwen2-Q8_0"} {
		t.Run(name, func(t *testing.T) {
			m, err := infer.Load(files[name](t), infer.Options{Backend: "cpu", Context: 64, Batch: 16, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := m.UseSequences(2); err != nil {
				t.Fatal(err)
			}
			vocab := m.Hparams.Vocab
			alone := func(prompt []int32) []float32 {
				if err := m.Forward(prompt, 0); err != nil {
					t.Fatal(err)
				}
				return slices.Clone(m.Logits())
			}
			a := []int32{1, 5, 9, 13, 2}
			b := []int32{7, 3, 3, 8, 40, 41, 6}
			wantA, wantB := alone(a), alone(b)
			wantA2, wantB2 := alone(append(slices.Clone(a), 11)), alone(append(slices.Clone(b), 12))

			const baseB = 32
			var rows []infer.Row
			for i, tok := range a {
				rows = append(rows, infer.Row{Token: tok, Pos: i})
			}
			for i, tok := range b {
				rows = append(rows, infer.Row{Token: tok, Pos: i, Base: baseB, Seq: 1})
			}
			logits := make([]float32, 2*vocab)
			if err := m.ForwardRows(rows, []int{len(a) - 1, len(rows) - 1}, logits); err != nil {
				t.Fatal(err)
			}
			same(t, "prefill A", logits[:vocab], wantA)
			same(t, "prefill B", logits[vocab:], wantB)

			// The decode step: B first this time, and A's row after it.
			step := []infer.Row{{Token: 12, Pos: len(b), Base: baseB, Seq: 1}, {Token: 11, Pos: len(a)}}
			if err := m.ForwardRows(step, []int{1, 0}, logits); err != nil {
				t.Fatal(err)
			}
			same(t, "decode A", logits[:vocab], wantA2)
			same(t, "decode B", logits[vocab:], wantB2)
		})
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: logit %d is %v, a pass of its own gives %v", what, i, got[i], want[i])
		}
	}
}

func TestForwardRowsRejects(t *testing.T) {
	m, err := infer.Load(open(t, tinymodel.Small(gguf.Q8_0)), infer.Options{Backend: "cpu", Context: 16, Batch: 4, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	logits := make([]float32, 2*m.Hparams.Vocab)
	for _, c := range []struct {
		name string
		rows []infer.Row
		outs []int
		want error
	}{
		{"no rows", nil, []int{0}, infer.ErrBadShape},
		{"past the cache", []infer.Row{{Token: 1, Pos: 10, Base: 6}}, []int{0}, infer.ErrContextFull},
		{"bad token", []infer.Row{{Token: -1}}, []int{0}, infer.ErrBadShape},
		{"too many rows", make([]infer.Row, 5), []int{0}, infer.ErrBadShape},
		{"output out of range", []infer.Row{{Token: 1}}, []int{1}, infer.ErrBadShape},
		{"too many outputs", []infer.Row{{Token: 1}}, []int{0, 0, 0}, infer.ErrBadShape},
	} {
		if err := m.ForwardRows(c.rows, c.outs, logits); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if !m.RowsSupported() {
		t.Error("RowsSupported is false on the CPU")
	}

	// A recurrent network's rows name sequence states the model keeps,
	// each sequence's rows together and in order.
	q, err := infer.Load(qwen35File(t, gguf.Q8_0), infer.Options{Backend: "cpu", Context: 16, Batch: 4, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.UseSequences(2); err != nil {
		t.Fatal(err)
	}
	logits = make([]float32, q.Hparams.Vocab)
	for _, c := range []struct {
		name string
		rows []infer.Row
	}{
		{"a state not kept", []infer.Row{{Token: 1, Seq: 2}}},
		{"a negative state", []infer.Row{{Token: 1, Seq: -1}}},
		{"a sequence's rows apart", []infer.Row{{Token: 1, Pos: 0}, {Token: 1, Pos: 0, Base: 8, Seq: 1}, {Token: 1, Pos: 1}}},
		{"a sequence's rows out of order", []infer.Row{{Token: 1, Pos: 1}, {Token: 1, Pos: 0}}},
	} {
		if err := q.ForwardRows(c.rows, []int{0}, logits); !errors.Is(err, infer.ErrBadShape) {
			t.Errorf("qwen35, %s: %v, want %v", c.name, err, infer.ErrBadShape)
		}
	}
	if !q.RowsSupported() {
		t.Error("RowsSupported is false for qwen35 on the CPU")
	}
}

// rotatedQwen3File writes synth's tiny qwen3 model (vocab cut to 1024)
// with its weights in Bonsai 2's Hadamard basis.
func rotatedQwen3File(t *testing.T) *gguf.File {
	t.Helper()
	s, err := synth.ArchShape("qwen3", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	s.Vocab, s.Tied = 1024, false
	dir := t.TempDir()
	path := filepath.Join(dir, "rotated.gguf")
	o := synth.RotatedOptions{Options: synth.Options{Shape: s, Type: gguf.Q1_0, Seed: 5}, Block: 128}
	if err := synth.WriteRotated(path, filepath.Join(dir, "twin.gguf"), o); err != nil {
		t.Fatal(err)
	}
	return openPath(t, path)
}
