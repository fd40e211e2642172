package engine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/internal/toyrec"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// toyRecurrentPath writes a toy recurrent model (infer/internal/toyrec: a
// tiny Qwen3 whose logits also depend on a state of its whole history) with
// the real Qwen3 tokenizer.
func toyRecurrentPath(t *testing.T) string {
	t.Helper()
	cfg := tinymodel.Config{Layers: 2, Embed: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 256,
		Context: 1024, Type: gguf.Q8_0, Tied: true, Seed: 3, RopeBase: 1e6}
	cfg, err := tinymodel.WithQwenTokenizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data, err := tinymodel.Build(toyrec.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "toyrec.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRecurrentStateReuse(t *testing.T) {
	checkStateReuse(t, toyRecurrentPath(t), toyrec.Backend)
}

// The same conversation on a dense model: the checks hold there too (and
// no notice is needed, its cache being truncatable).
func TestDenseStateReuse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dense.gguf")
	f := testFile(t)
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	checkStateReuse(t, path, "cpu")
}

// turnResult is one reply and what producing it cost and said.
type turnResult struct {
	text    string
	ids     []int32
	prefill int
	prompt  int
	notices []string
}

func turnOf(t *testing.T, e *Engine, msgs []chat.Message) turnResult {
	t.Helper()
	e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 8, Sampling: greedy})
	var r turnResult
	for _, ev := range waitFor[Done](t, e) {
		switch ev := ev.(type) {
		case Token:
			r.ids = append(r.ids, ev.ID)
			r.text += ev.Text
		case Notice:
			r.notices = append(r.notices, ev.Text)
		case Error:
			t.Fatalf("engine error: %v", ev.Err)
		case Done:
			r.prefill = ev.Stats.PrefillTokens
			r.prompt = ev.Stats.ContextUsed - ev.Stats.DecodeTokens + 1
		}
	}
	return r
}

// checkStateReuse drives one engine through a chat as the TUI does —
// continue, regenerate, edit the last message, edit the first — and checks
// that every reply is the one a fresh engine gives the same conversation
// (which is what `bonsai -c` does: a new process prefills it all), that
// continuing and regenerating prefill only what is new, and that a restart
// from position 0 forced by state that cannot go back is announced. path is
// any model file; backend runs it. Replies are greedy.
func checkStateReuse(t *testing.T, path, backend string) {
	t.Helper()
	var info ModelInfo
	open := func() *Engine {
		e := New(Options{Path: path, Backend: backend, Threads: 2, Context: 512})
		t.Cleanup(e.Close)
		evs := waitFor[Loaded](t, e)
		info = evs[len(evs)-1].(Loaded).Info
		return e
	}
	live, fresh := open(), open()
	recurrent := info.RecurrentBytes > 0
	// reference is the reply of an engine that has seen nothing of msgs.
	reference := func(msgs []chat.Message) turnResult {
		fresh.Reset()
		return turnOf(t, fresh, msgs)
	}
	same := func(what string, got, want turnResult) {
		t.Helper()
		if !slices.Equal(got.ids, want.ids) {
			t.Errorf("%s: tokens %v (%q), a fresh prefill of the same conversation gives %v (%q)", what, got.ids, got.text, want.ids, want.text)
		}
	}
	user := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: s} }
	assistant := func(s string) chat.Message { return chat.Message{Role: chat.RoleAssistant, Content: s} }

	c1 := []chat.Message{user("Tell me about the trees of the field")}
	r1 := turnOf(t, live, c1)
	same("first turn", r1, reference(c1))

	c2 := append(slices.Clone(c1), assistant(r1.text), user("And the rocks?"))
	r2 := turnOf(t, live, c2)
	same("second turn", r2, reference(c2))
	if r2.prefill > r2.prompt-r1.prompt+12 {
		t.Errorf("continuing prefilled %d of %d prompt tokens; the first prompt alone was %d", r2.prefill, r2.prompt, r1.prompt)
	}

	// Regenerate: the same conversation again.
	again := turnOf(t, live, c2)
	same("regenerate", again, r2)
	if again.prefill > 16 {
		t.Errorf("regenerating prefilled %d of %d tokens, want only the reply's opening", again.prefill, again.prompt)
	}

	// A reply cut short (as Esc leaves it), then regenerated.
	live.Generate(GenerateRequest{Messages: c2, MaxTokens: 3, Sampling: greedy})
	waitFor[Done](t, live)
	same("regenerate after a reply cut short", turnOf(t, live, c2), r2)

	// Edit the last message, then the one before the last reply.
	c2e := append(slices.Clone(c1), assistant(r1.text), user("And the mountains, and the sea?"))
	edited := turnOf(t, live, c2e)
	same("edit the last message", edited, reference(c2e))
	if edited.prefill >= edited.prompt-r1.prompt {
		t.Errorf("editing the last message prefilled %d of %d tokens; the turn before it ended near %d", edited.prefill, edited.prompt, r1.prompt)
	}
	c3 := append(slices.Clone(c2e), assistant(edited.text), user("Why?"))
	r3 := turnOf(t, live, c3)
	same("third turn", r3, reference(c3))

	c1e := []chat.Message{user("Tell me about the birds of the air"), assistant(r1.text), user("Why?")}
	first := turnOf(t, live, c1e)
	same("edit the first message", first, reference(c1e))
	if recurrent && first.prefill != first.prompt {
		t.Errorf("editing the first message prefilled %d of %d tokens", first.prefill, first.prompt)
	}

	// Each re-read from 0 of a conversation the cache shared a part of is
	// announced; a truncatable cache needs no notice.
	for _, r := range []turnResult{r1, r2, again, edited, r3} {
		if len(r.notices) != 0 {
			t.Errorf("notice %q on a turn that needed no restart", r.notices)
		}
	}
	if want := map[bool]int{true: 1, false: 0}[recurrent]; len(first.notices) != want {
		t.Errorf("editing the first message (recurrent %v): notices %q, want %d", recurrent, first.notices, want)
	}
}

// The same conversation on the hybrid qwen35 network (synth's tiny: Gated
// DeltaNet layers beside gated attention), whose recurrent state cannot be
// truncated: continuing, regenerating, editing and resuming give the tokens
// of a fresh prefill.
func TestQwen35StateReuse(t *testing.T) {
	s, err := synth.ArchShape("qwen35", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: gguf.Q2_0, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	checkStateReuse(t, path, "cpu")
}
