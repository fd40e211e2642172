package gpu_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
)

// A KV cache saved and restored on the GPU continues as the sequence that
// was saved: the next token's logits are the same, bit for bit, with each
// cache type (a Q8_0 side saves its int8 and its scale words).
func TestKVStateRoundTrip(t *testing.T) {
	q8 := infer.KVQ8_0
	for _, kv := range []infer.KVTypes{{}, {K: q8, V: q8}, {V: q8}} {
		t.Run(kv.String(), func(t *testing.T) {
			f, err := tinymodel.Open(tinymodel.Small(gguf.Q8_0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			kvRoundTrip(t, loadKV(t, "gpu", f, kv))
		})
	}
}

func kvRoundTrip(t *testing.T, m *infer.Model) {
	ids := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53}
	next := append(slices.Clone(ids), 7)
	fp := m.StateFingerprint("test")

	s := infer.NewSequence(m)
	if _, err := s.Prefill(ids, nil); err != nil {
		t.Fatal(err)
	}
	var saved bytes.Buffer
	if err := s.WriteState(&saved, fp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill(next, nil); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(m.Logits())

	s.Reset()
	if _, err := s.Prefill([]int32{2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := infer.ReadState(bytes.NewReader(saved.Bytes()), int64(saved.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Fingerprint.Diff(fp); d != "" {
		t.Fatal(d)
	}
	if err := st.Restore(s); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Prefill(next, nil); err != nil || r != len(ids) {
		t.Fatalf("the prefill after a restore reused %d tokens (%v), want %d", r, err, len(ids))
	}
	if !slices.Equal(m.Logits(), want) {
		t.Error("the logits after restoring the KV cache differ from the saved sequence's")
	}
}
