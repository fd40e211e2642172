package infer_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/internal/toyrec"
)

func loadToy(t *testing.T, opts infer.Options) *infer.Model {
	t.Helper()
	cfg := toyrec.Config(tinymodel.Config{Layers: 1, Embed: 64, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 128,
		Vocab: 300, Context: 256, Type: gguf.F32, Tied: true, Seed: 5, RopeBase: 1e4})
	f, err := tinymodel.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Backend = toyrec.Backend
	if opts.Context == 0 {
		opts.Context = 128
	}
	m, err := infer.Load(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func toks(n int, seed int32) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = (seed*31 + int32(i)*17) % 96
	}
	return ids
}

// logitsAfter runs ids from position 0 and returns a copy of the logits.
func logitsAfter(t *testing.T, m *infer.Model, ids []int32) []float32 {
	t.Helper()
	if err := m.Forward(ids, 0); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(m.Logits())
}

// Loading a recurrent model allocates its state once: a second allocation
// costs the load a state's worth of memory and time for nothing.
func TestLoadAllocatesRecurrentStateOnce(t *testing.T) {
	m := loadToy(t, infer.Options{})
	if n := toyrec.Allocations(m.Backend()); n != 1 {
		t.Errorf("NewRecurrentState ran %d times at load, want 1", n)
	}
}

// The toy is what the other tests rely on: a state that belongs to other
// tokens changes its logits, beyond what the KV cache alone decides.
func TestToyRecurrentDependsOnState(t *testing.T) {
	m := loadToy(t, infer.Options{})
	a, b := toks(20, 1), toks(20, 2)
	ref := logitsAfter(t, m, slices.Concat(a, toks(5, 3)))

	if err := m.Forward(b, 0); err != nil {
		t.Fatal(err)
	}
	state := make([]float32, m.RecurrentSpec().Floats())
	if err := m.Backend().ReadRecurrentState(state); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(a, 0); err != nil {
		t.Fatal(err)
	}
	// Behind the Model's back: b's state under a's KV cache.
	if err := m.Backend().WriteRecurrentState(state); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(toks(5, 3), len(a)); err != nil {
		t.Fatal(err)
	}
	if sample(m.Logits()) == sample(ref) {
		t.Fatalf("a foreign state left the greedy token %d unchanged: the toy cannot catch a wrong state", sample(ref))
	}
}

func sample(l []float32) int {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return best
}

func TestRecurrentForwardTracksState(t *testing.T) {
	m := loadToy(t, infer.Options{})
	if !m.Recurrent() || m.RecurrentSpec() != toyrec.Spec || m.StatePos() != -1 {
		t.Fatalf("loaded toy: recurrent %v spec %+v state at %d", m.Recurrent(), m.RecurrentSpec(), m.StatePos())
	}
	a, b, c := toks(10, 1), toks(7, 2), toks(4, 3)
	want := logitsAfter(t, m, slices.Concat(a, c))

	// Continuing at StatePos is a continuation.
	if err := m.Forward(a, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(b, len(a)); err != nil {
		t.Fatal(err)
	}
	if m.StatePos() != len(a)+len(b) {
		t.Fatalf("state at %d, want %d", m.StatePos(), len(a)+len(b))
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := m.Snapshots(); !slices.Equal(got, []int{len(a), len(a) + len(b)}) {
		t.Fatalf("snapshots %v", got)
	}

	// Anywhere else without a snapshot: refused, nothing run.
	for _, pos := range []int{3, len(a) + 1, len(a) + len(b) + 1} {
		err := m.Forward(c, pos)
		if !errors.Is(err, infer.ErrStateMismatch) {
			t.Errorf("Forward at %d with the state at %d: %v, want ErrStateMismatch", pos, len(a)+len(b), err)
		}
		if m.StatePos() != len(a)+len(b) {
			t.Errorf("a refused pass moved the state to %d", m.StatePos())
		}
	}
	if m.CanResume(3) || !m.CanResume(0) || !m.CanResume(len(a)) || m.ResumePoint(len(a)+3) != len(a) || m.ResumePoint(5) != 0 {
		t.Errorf("resume points wrong: snapshots %v, state %d", m.Snapshots(), m.StatePos())
	}

	// At a snapshot: restored, the same logits as a fresh run of the same
	// tokens, and the snapshot after it is gone (its positions are
	// overwritten).
	if err := m.Forward(c, len(a)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Logits(), want) {
		t.Error("logits after restoring a snapshot differ from a fresh prefill of the same tokens")
	}
	if got := m.Snapshots(); !slices.Equal(got, []int{len(a)}) {
		t.Errorf("snapshots after rewriting from %d: %v", len(a), got)
	}
	// Restoring twice works (a second regenerate).
	if err := m.Forward(c, len(a)); err != nil || !slices.Equal(m.Logits(), want) {
		t.Errorf("second restore: %v", err)
	}

	m.Drop()
	if len(m.Snapshots()) != 0 || m.StatePos() != -1 || !errors.Is(m.Forward(c, len(a)), infer.ErrStateMismatch) {
		t.Errorf("after Drop: snapshots %v, state %d", m.Snapshots(), m.StatePos())
	}
}

func TestSnapshotLimit(t *testing.T) {
	m := loadToy(t, infer.Options{Snapshots: 2})
	if err := m.Forward(toks(5, 1), 0); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if i > 0 {
			if err := m.Forward(toks(5, int32(i)), 5*i); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Snapshots(); !slices.Equal(got, []int{15, 20}) {
		t.Errorf("snapshots %v, want the latest two, [15 20]", got)
	}
	held, limit := m.SnapshotBytes()
	if held != 2*toyrec.Spec.Bytes() || limit != held {
		t.Errorf("snapshot bytes %d of %d, want 2 states of %d", held, limit, toyrec.Spec.Bytes())
	}
	mem := m.Memory(20)
	if mem.Recurrent != toyrec.Spec.Bytes() || mem.Snapshots != held || mem.SnapshotsMax != limit ||
		mem.StateUsed() != mem.KVUsed+mem.Recurrent+held {
		t.Errorf("memory %+v", mem)
	}

	off := loadToy(t, infer.Options{Snapshots: -1})
	if err := off.Forward(toks(5, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := off.Checkpoint(); err != nil || len(off.Snapshots()) != 0 {
		t.Errorf("snapshots off: %v, %v", off.Snapshots(), err)
	}
}

// A network without recurrent layers keeps its behaviour: any position,
// no snapshots, no state in the memory figures.
func TestNonRecurrentModelUnchanged(t *testing.T) {
	f, err := tinymodel.Open(tinymodel.Small(gguf.F32))
	if err != nil {
		t.Fatal(err)
	}
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Forward(toks(8, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if m.Recurrent() || m.StatePos() != -1 || len(m.Snapshots()) != 0 || !m.CanResume(5) || m.ResumePoint(5) != 5 {
		t.Errorf("non-recurrent: state %d, snapshots %v, resume %d", m.StatePos(), m.Snapshots(), m.ResumePoint(5))
	}
	if err := m.Forward(toks(2, 2), 5); err != nil {
		t.Errorf("Forward inside the cache: %v", err)
	}
	if mem := m.Memory(7); mem.Recurrent != 0 || mem.SnapshotsMax != 0 || mem.KVUsed != 7*infer.KVBytesPerToken(m.Hparams, infer.KVTypes{}) {
		t.Errorf("memory %+v", mem)
	}
}

// Sequence: a prompt that shares a prefix resumes at the latest mark it
// passed, never in between, and gives a fresh prefill's logits.
func TestSequenceResumesAtMarks(t *testing.T) {
	m := loadToy(t, infer.Options{Batch: 8})
	turn1, turn2 := toks(13, 1), toks(9, 2)
	full := slices.Concat(turn1, turn2)
	s := infer.NewSequence(m)
	r, err := s.PrefillMarked(full, []int{len(turn1)}, nil)
	if err != nil || r.Kept != 0 {
		t.Fatalf("first prefill: %+v, %v", r, err)
	}
	if got := m.Snapshots(); !slices.Equal(got, []int{len(turn1)}) {
		t.Fatalf("snapshots %v, want the mark %d", got, len(turn1))
	}
	// An edit two tokens after the mark.
	edited := slices.Concat(turn1, turn2[:2], toks(6, 7))
	want := logitsAfter(t, loadToy(t, infer.Options{}), edited)
	r, err = s.PrefillMarked(edited, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Shared < len(turn1)+2 {
		t.Fatalf("shared %d, want at least %d", r.Shared, len(turn1)+2)
	}
	if r.Kept != len(turn1) {
		t.Errorf("kept %d of %d shared, want the mark at %d", r.Kept, r.Shared, len(turn1))
	}
	if !slices.Equal(m.Logits(), want) {
		t.Error("resumed prefill's logits differ from a fresh prefill")
	}
	// Continuing: only the new tokens run.
	more := slices.Concat(edited, toks(3, 9))
	if r, err := s.Prefill(more, nil); err != nil || r != len(edited) {
		t.Errorf("continuation kept %d, want %d (%v)", r, len(edited), err)
	}
	// Without snapshots the same edit starts over.
	s.Reset()
	if r, err := s.Prefill(full, nil); err != nil || r != 0 {
		t.Fatalf("after Reset: kept %d, %v", r, err)
	}
	if r, err := s.PrefillMarked(edited, nil, nil); err != nil || r.Kept != 0 || r.Shared == 0 {
		t.Errorf("no snapshot: %+v, %v; want a restart from 0", r, err)
	}
	if !slices.Equal(m.Logits(), want) {
		t.Error("restarted prefill's logits differ from a fresh prefill")
	}
}
