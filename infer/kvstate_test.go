package infer_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// loadCPU loads a tiny qwen3, or synth's tiny qwen35, on the CPU.
func loadCPU(t testing.TB, arch string) *infer.Model { return loadCPUWith(t, arch, infer.KVTypes{}) }

// loadCPUWith is loadCPU with a KV cache of the types kv.
func loadCPUWith(t testing.TB, arch string, kv infer.KVTypes) *infer.Model {
	t.Helper()
	var f *gguf.File
	var err error
	if arch == "qwen35" {
		s, serr := synth.ArchShape("qwen35", "tiny")
		if serr != nil {
			t.Fatal(serr)
		}
		path := t.TempDir() + "/m.gguf"
		if err := synth.Write(path, synth.Options{Shape: s, Type: gguf.Q8_0, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		f, err = gguf.Open(path)
	} else {
		f, err = tinymodel.Open(tinymodel.Config{Layers: 2, Embed: 64, Heads: 2, KVHeads: 1, HeadDim: 32, FFN: 128,
			Vocab: 300, Context: 256, Type: gguf.F32, Tied: true, Seed: 5, RopeBase: 1e4})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := infer.Load(f, infer.Options{Backend: "cpu", Threads: 1, Context: 64, KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// savedState runs ids on m and returns the state file of that sequence.
func savedState(t testing.TB, m *infer.Model, ids []int32, marks []int) []byte {
	t.Helper()
	s := infer.NewSequence(m)
	if _, err := s.PrefillMarked(ids, marks, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.WriteState(&buf, m.StateFingerprint("test")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A restored sequence continues exactly as the one saved: the same logits
// for the next token, and a recurrent network's snapshots come back too.
// A q8_0 cache (K, or K and V) is saved as its blocks.
func TestStateRoundTrip(t *testing.T) {
	q8 := infer.KVTypes{K: infer.KVQ8_0, V: infer.KVQ8_0}
	for _, c := range []struct {
		arch string
		kv   infer.KVTypes
	}{{"qwen3", infer.KVTypes{}}, {"qwen35", infer.KVTypes{}}, {"qwen3", q8}, {"qwen3", infer.KVTypes{K: infer.KVQ8_0}}, {"qwen35", q8}} {
		arch := c.arch
		t.Run(arch+"-"+c.kv.K.String()+"-"+c.kv.V.String(), func(t *testing.T) {
			m := loadCPUWith(t, arch, c.kv)
			ids := toks(20, 3)
			data := savedState(t, m, ids, []int{12})
			next := []int32{7}
			// The reference runs the next token alone, as it runs after a
			// restore (a batch's rounding depends on its size).
			s := infer.NewSequence(m)
			if _, err := s.Prefill(ids, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Prefill(append(slices.Clone(ids), next...), nil); err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(m.Logits())

			s.Reset()
			if _, err := s.Prefill(toks(30, 9), nil); err != nil { // other contents
				t.Fatal(err)
			}
			st, err := infer.ReadState(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if d := st.Fingerprint.Diff(m.StateFingerprint("test")); d != "" {
				t.Fatalf("fingerprint differs: %s", d)
			}
			if err := st.Restore(s); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Tokens(), ids) {
				t.Fatalf("restored tokens %v, want %v", s.Tokens(), ids)
			}
			if m.Recurrent() && (m.StatePos() != len(ids) || !slices.Equal(m.Snapshots(), []int{12})) {
				t.Errorf("state at %d with snapshots %v, want %d and [12]", m.StatePos(), m.Snapshots(), len(ids))
			}
			r, err := s.Prefill(append(slices.Clone(ids), next...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if r != len(ids) {
				t.Errorf("the prefill after a restore reused %d tokens, want %d", r, len(ids))
			}
			if !slices.Equal(m.Logits(), want) {
				t.Error("the logits after a restore differ from the sequence's that was saved")
			}
			// Back to the snapshot: an edit after position 12.
			if m.Recurrent() {
				edited := append(slices.Clone(ids[:12]), 1, 2, 3)
				if r, err := s.Prefill(edited, nil); err != nil || r != 12 {
					t.Errorf("an edit after the restored snapshot reused %d tokens (%v), want 12", r, err)
				}
			}
		})
	}
}

// Usable says what a prompt can keep: the shared prefix on a truncatable
// cache, a saved state's position on a recurrent network.
func TestStateUsable(t *testing.T) {
	ids := toks(20, 3)
	for _, tc := range []struct {
		arch   string
		prompt []int32
		want   int
	}{
		{"qwen3", append(slices.Clone(ids), 5), 20},
		{"qwen3", ids, 19}, // the last token is always run
		{"qwen3", append(slices.Clone(ids[:15]), 1, 1), 15},
		{"qwen35", append(slices.Clone(ids), 5), 20},
		{"qwen35", append(slices.Clone(ids[:15]), 1, 1), 12}, // the snapshot
		{"qwen35", append(slices.Clone(ids[:10]), 1, 1), 0},
	} {
		m := loadCPU(t, tc.arch)
		data := savedState(t, m, ids, []int{12})
		st, err := infer.ReadState(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Usable(tc.prompt); got != tc.want {
			t.Errorf("%s: Usable = %d, want %d", tc.arch, got, tc.want)
		}
	}
}

// FuzzReadState: any bytes are a state or ErrBadState, never a panic; a
// state that reads and restores leaves the sequence holding its tokens,
// one that fails leaves it empty.
func FuzzReadState(f *testing.F) {
	m := loadCPU(f, "qwen35")
	data := savedState(f, m, toks(6, 1), []int{3})
	f.Add(data)
	f.Add(data[:len(data)-1])
	f.Add(data[:40])
	f.Add([]byte("BONSAIKV"))
	s := infer.NewSequence(m)
	fp := m.StateFingerprint("test")
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := infer.ReadState(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, infer.ErrBadState) {
				t.Fatalf("error %v does not wrap ErrBadState", err)
			}
			return
		}
		if st.Fingerprint.Diff(fp) != "" {
			return
		}
		if err := st.Restore(s); err != nil {
			if s.Len() != 0 {
				t.Fatalf("a failed restore left %d tokens", s.Len())
			}
			return
		}
		if !slices.Equal(s.Tokens(), st.Tokens) {
			t.Fatalf("restored %v, the file says %v", s.Tokens(), st.Tokens)
		}
	})
}
