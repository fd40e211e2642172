package infer_test

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

func TestSequencePrefill(t *testing.T) {
	m, err := infer.Load(open(t, tinymodel.Small(gguf.Q8_0)), infer.Options{Backend: "cpu", Context: 32, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := infer.NewSequence(m)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7}

	// Stopped after the first batch: the cache keeps what ran.
	_, err = s.Prefill(prompt, func(done, total int) bool { return false })
	if !errors.Is(err, infer.ErrInterrupted) || s.Len() != 2 {
		t.Fatalf("interrupted prefill: err %v, %d tokens cached; want ErrInterrupted and 2", err, s.Len())
	}
	var calls []int
	reused, err := s.Prefill(prompt, func(done, total int) bool { calls = append(calls, done); return true })
	if err != nil || reused != 2 || s.Len() != 7 {
		t.Fatalf("resumed prefill: reused %d, cached %d, err %v; want 2, 7, nil", reused, s.Len(), err)
	}
	if len(calls) != 3 || calls[2] != 5 {
		t.Errorf("progress calls %v, want 3 ending at 5 of 5", calls)
	}
	want := append([]float32(nil), m.Logits()...)

	// The same prompt again reruns only its last token, with the same logits.
	if reused, err := s.Prefill(prompt, nil); err != nil || reused != 6 {
		t.Fatalf("repeat: reused %d, err %v; want 6", reused, err)
	}
	for i, l := range m.Logits() {
		if l != want[i] {
			t.Fatalf("logit %d changed on repeat: %v vs %v", i, l, want[i])
		}
	}
	// A diverging prompt keeps the common prefix.
	if reused, err := s.Prefill([]int32{1, 2, 3, 9}, nil); err != nil || reused != 3 || s.Len() != 4 {
		t.Fatalf("diverging: reused %d, cached %d, err %v; want 3, 4", reused, s.Len(), err)
	}
	if err := s.Append(11); err != nil || s.Len() != 5 {
		t.Fatalf("append: %v, %d cached", err, s.Len())
	}
	if _, err := s.Prefill(make([]int32, 33), nil); !errors.Is(err, infer.ErrContextFull) {
		t.Errorf("over-long prompt: %v, want ErrContextFull", err)
	}
}

// A sequence handed tokens another owner of the model ran (Hold) reuses
// them as its own; more than the context fail.
func TestSequenceHold(t *testing.T) {
	m, err := infer.Load(open(t, tinymodel.Small(gguf.Q8_0)), infer.Options{Backend: "cpu", Context: 32, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int32{1, 2, 3, 4, 5, 6, 7}
	if err := m.Forward(prompt[:5], 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		held     []int32
		err      error
		reused   int
		logitsOf []int32
	}{
		{make([]int32, 33), infer.ErrContextFull, 0, nil},
		{prompt[:5], nil, 5, prompt},
	} {
		s := infer.NewSequence(m)
		if err := s.Hold(c.held); !errors.Is(err, c.err) {
			t.Fatalf("holding %d tokens: %v, want %v", len(c.held), err, c.err)
		}
		if c.err != nil {
			continue
		}
		reused, err := s.Prefill(prompt, nil)
		if err != nil || reused != c.reused {
			t.Fatalf("prefill after holding %d: reused %d, err %v; want %d", len(c.held), reused, err, c.reused)
		}
		got := append([]float32(nil), m.Logits()...)
		if err := m.Forward(c.logitsOf, 0); err != nil {
			t.Fatal(err)
		}
		for i, l := range m.Logits() {
			if l != got[i] {
				t.Fatalf("logit %d: %v after holding, %v after the whole prompt", i, got[i], l)
			}
		}
	}
}
