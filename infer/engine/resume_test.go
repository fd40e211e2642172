package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

// qwen3Path writes the 2-layer Q1_0 test model (real Qwen3 tokenizer) with
// weights from seed.
func qwen3Path(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	cfg := tinymodel.Config{Layers: 2, Embed: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FFN: 256,
		Context: 1024, Type: gguf.Q1_0, Tied: true, Seed: seed, RopeBase: 1e6}
	cfg, err := tinymodel.WithQwenTokenizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	data, err := tinymodel.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "qwen3.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// qwen35Path writes synth's tiny hybrid qwen35 (Gated DeltaNet layers
// beside gated attention).
func qwen35Path(t *testing.T, dir string) string {
	t.Helper()
	s, err := synth.ArchShape("qwen35", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "qwen35.gguf")
	if err := synth.Write(path, synth.Options{Shape: s, Type: gguf.Q2_0, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	return path
}

// longChat is a conversation of a few long turns (about 350 tokens with
// the Qwen3 tokenizer) and a last user message.
func longChat() []chat.Message {
	var msgs []chat.Message
	topics := []string{"trees of the field", "rocks of the hills", "birds of the air", "fish of the sea"}
	for i, topic := range topics {
		text := strings.Repeat("Tell me everything you know about the "+topic+", and then some more. ", 6)
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: text})
		if i < len(topics)-1 {
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("The "+topic+" are many and old. ", 5)})
		}
	}
	return msgs
}

// session runs replies in stored session id on an engine of path whose
// states live in dir ("" keeps none).
type session struct {
	t    *testing.T
	e    *Engine
	id   int64
	info ModelInfo
}

func openSession(t *testing.T, path, dir string, ctx int, id int64) *session {
	t.Helper()
	e := New(Options{Path: path, Backend: "cpu", Threads: 2, Context: ctx, StateDir: dir})
	t.Cleanup(e.Close)
	evs := waitFor[Loaded](t, e)
	return &session{t: t, e: e, id: id, info: evs[len(evs)-1].(Loaded).Info}
}

func (s *session) turn(msgs []chat.Message) turnResult {
	s.t.Helper()
	s.e.Generate(GenerateRequest{Messages: msgs, MaxTokens: 8, Sampling: greedy, Session: s.id})
	var r turnResult
	for _, ev := range waitFor[Done](s.t, s.e) {
		switch ev := ev.(type) {
		case Token:
			r.ids = append(r.ids, ev.ID)
			r.text += ev.Text
		case Notice:
			r.notices = append(r.notices, ev.Text)
		case Error:
			s.t.Fatalf("engine error: %v", ev.Err)
		case Done:
			r.prefill = ev.Stats.PrefillTokens
			r.prompt = ev.Stats.ContextUsed - ev.Stats.DecodeTokens + 1
		}
	}
	return r
}

// chatThenClose runs the first reply of msgs in session id and closes the
// engine, which saves the session's state in dir; it returns the
// conversation with that reply and a next message.
func chatThenClose(t *testing.T, path, dir string, ctx int, id int64, msgs []chat.Message) []chat.Message {
	t.Helper()
	s := openSession(t, path, dir, ctx, id)
	r := s.turn(msgs)
	s.e.Close()
	if _, err := os.Stat(StatePath(dir, id)); err != nil {
		t.Fatalf("closing the chat saved no state: %v", err)
	}
	return append(slices.Clone(msgs), chat.Message{Role: chat.RoleAssistant, Content: r.text},
		chat.Message{Role: chat.RoleUser, Content: "And what else?"})
}

func hasNotice(r turnResult, part string) bool {
	for _, n := range r.notices {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// A chat closed and resumed answers its next message as the chat would
// have had it stayed open, token for token (greedy), having read only the
// new message: the saved KV cache (and qwen35's recurrent state) stands in
// for the conversation.
func TestResumeMatchesUninterruptedChat(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T, dir string) string
	}{
		{"qwen3", func(t *testing.T, dir string) string { return qwen3Path(t, dir, 3) }},
		{"qwen35", qwen35Path},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, states := tc.path(t, dir), filepath.Join(dir, "state")
			const ctx = 1024
			first := longChat()

			open := openSession(t, path, "", ctx, 0) // never closed
			r1 := open.turn(first)
			next := append(slices.Clone(first), chat.Message{Role: chat.RoleAssistant, Content: r1.text},
				chat.Message{Role: chat.RoleUser, Content: "And what else?"})
			want := open.turn(next)

			if got := chatThenClose(t, path, states, ctx, 5, first); !slices.Equal(got, next) {
				t.Fatalf("the first reply differs between engines: %q vs %q", got[len(got)-2].Content, r1.text)
			}
			resumed := openSession(t, path, states, ctx, 5)
			got := resumed.turn(next)
			if !slices.Equal(got.ids, want.ids) {
				t.Errorf("resumed reply %v (%q), the open chat's %v (%q)", got.ids, got.text, want.ids, want.text)
			}
			if !hasNotice(got, "resumed from the saved state") {
				t.Errorf("notices %q, want one saying the state was restored", got.notices)
			}
			// What the open chat read for the same message: its new turn and
			// the last reply's end, which the cache never holds.
			if got.prefill > want.prefill || got.prefill >= got.prompt/4 {
				t.Errorf("the resumed chat read %d of %d prompt tokens; the open chat read %d", got.prefill, got.prompt, want.prefill)
			}
			if got.prompt < 300 {
				t.Errorf("the conversation is %d tokens: too short to tell a restore from a prefill", got.prompt)
			}
		})
	}
}

// A saved state that does not belong to the model, its settings or the
// conversation, or that is damaged, is not used: the chat is read again
// (and replies as a fresh engine would), the status says why, and an
// unusable file is deleted.
func TestResumeRefusesAStateThatDoesNotFit(t *testing.T) {
	const ctx, id = 1024, 9
	first := longChat()
	for _, tc := range []struct {
		name string
		// change alters the model file, the saved state or the settings;
		// it returns the context to resume with.
		change func(t *testing.T, path, state string) int
		notice string
		keeps  bool // the file is still there after the refusal
	}{
		{"model file", func(t *testing.T, path, _ string) int {
			qwen3Path(t, filepath.Dir(path), 4) // the same path, other weights
			return ctx
		}, "the model file has changed", false},
		{"context", func(*testing.T, string, string) int { return ctx + 256 }, "the context size changed", false},
		{"cache type", func(t *testing.T, _, state string) int {
			editHeader(t, state, func(h map[string]any) {
				h["fingerprint"].(map[string]any)["cache_k"] = "q8_0"
				h["fingerprint"].(map[string]any)["cache_v"] = "q8_0"
			})
			return ctx
		}, "the KV cache type changed", false},
		{"corrupt", func(t *testing.T, _, state string) int {
			data, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x40 // a bit of the KV cache
			if err := os.WriteFile(state, data, 0o600); err != nil {
				t.Fatal(err)
			}
			return ctx
		}, "damaged", false},
		{"truncated", func(t *testing.T, _, state string) int {
			fi, err := os.Stat(state)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(state, fi.Size()-100); err != nil {
				t.Fatal(err)
			}
			return ctx
		}, "damaged", false},
		{"another version", func(t *testing.T, _, state string) int {
			data, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(data[8:], 99)
			if err := os.WriteFile(state, data, 0o600); err != nil {
				t.Fatal(err)
			}
			return ctx
		}, "damaged", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "state")
			next := chatThenClose(t, path, states, ctx, id, first)
			resumeCtx := tc.change(t, path, StatePath(states, id))

			fresh := openSession(t, path, "", resumeCtx, 0)
			want := fresh.turn(next)
			resumed := openSession(t, path, states, resumeCtx, id)
			got := resumed.turn(next)
			if !slices.Equal(got.ids, want.ids) {
				t.Errorf("reply %v (%q), a fresh engine's %v (%q)", got.ids, got.text, want.ids, want.text)
			}
			if got.prefill != got.prompt {
				t.Errorf("read %d of %d prompt tokens, want all: the state does not fit", got.prefill, got.prompt)
			}
			if !hasNotice(got, "reading the conversation again") || !hasNotice(got, tc.notice) {
				t.Errorf("notices %q, want one saying the conversation is read again because %s", got.notices, tc.notice)
			}
			if _, err := os.Stat(StatePath(states, id)); (err == nil) != tc.keeps {
				t.Errorf("after the refusal the state file exists: %v, want %v", err == nil, tc.keeps)
			}
		})
	}
}

// editHeader rewrites a state file's JSON header.
func editHeader(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(data[12:])
	var h map[string]any
	if err := json.Unmarshal(data[16:16+n], &h); err != nil {
		t.Fatal(err)
	}
	edit(h)
	js, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.Write(data[:12])
	binary.Write(&out, binary.LittleEndian, uint32(len(js)))
	out.Write(js)
	out.Write(data[16+n:])
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A conversation edited after its state was saved keeps what still
// matches: the turns before the edit are not read again.
func TestResumeAfterAnEdit(t *testing.T) {
	dir := t.TempDir()
	path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "state")
	first := longChat()
	chatThenClose(t, path, states, 1024, 3, first)
	edited := slices.Clone(first)
	edited[len(edited)-1].Content = "Something else entirely."
	s := openSession(t, path, states, 1024, 3)
	r := s.turn(edited)
	if r.prefill >= r.prompt/2 {
		t.Errorf("read %d of %d prompt tokens after editing the last message", r.prefill, r.prompt)
	}
}

// Each session's state is its own: a reply in another session saves the
// first one's and starts from the other's; the cache dir keeps at most
// StateFiles states (least recently used out), and a deleted session's
// state goes.
func TestSessionStatesAreBounded(t *testing.T) {
	dir := t.TempDir()
	path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "state")
	e := New(Options{Path: path, Backend: "cpu", Threads: 2, Context: 512, StateDir: states, StateFiles: 2})
	t.Cleanup(e.Close)
	waitFor[Loaded](t, e)
	s := &session{t: t, e: e}
	for _, id := range []int64{1, 2, 3} {
		s.id = id
		s.turn(ask("Hello from session " + strings.Repeat("x", int(id))))
	}
	e.Reset() // saves session 3's
	s.id = 0
	s.turn(ask("unsaved")) // waits for the Reset
	var ids []string
	entries, _ := os.ReadDir(states)
	for _, ent := range entries {
		ids = append(ids, ent.Name())
	}
	if want := []string{"2.kvstate", "3.kvstate"}; !slices.Equal(ids, want) {
		t.Errorf("saved states %v, want %v (the two most recent)", ids, want)
	}
	if err := PruneSavedStates(states, func(id int64) bool { return id != 2 }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(StatePath(states, 2)); err == nil {
		t.Error("a deleted session's state is still there")
	}
	if err := RemoveSavedState(states, 3); err != nil {
		t.Fatal(err)
	}
	if err := RemoveSavedState(states, 3); err != nil {
		t.Errorf("removing a state that is not there: %v", err)
	}
}

// A new chat gets its session after its first reply (BindSession): its
// state is then saved under it.
func TestBindSessionSavesUnderIt(t *testing.T) {
	dir := t.TempDir()
	path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "state")
	s := openSession(t, path, states, 512, 0)
	s.turn(ask("Hello"))
	s.e.BindSession(42)
	s.e.Close()
	if _, err := os.Stat(StatePath(states, 42)); err != nil {
		t.Errorf("no state saved under the bound session: %v", err)
	}
}

// A state that cannot be written (here the state directory is a file, as
// a full disk would fail the write) costs nothing but the state: the chat
// goes on, and the next session's reply is served.
func TestUnwritableStateDirKeepsChatting(t *testing.T) {
	dir := t.TempDir()
	path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(states, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openSession(t, path, states, 512, 1)
	first := s.turn(ask("Hello"))
	s.id = 2 // another session: the first one's state is saved, and fails
	second := s.turn(ask("Hello"))
	if !slices.Equal(first.ids, second.ids) {
		t.Errorf("the same message in a new session: %v, then %v", first.ids, second.ids)
	}
	if data, err := os.ReadFile(states); err != nil || string(data) != "x" {
		t.Errorf("the file in the state directory's place changed: %q, %v", data, err)
	}
}

// A state larger than the whole budget is not kept.
func TestStateOverBudgetIsNotKept(t *testing.T) {
	dir := t.TempDir()
	path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "state")
	e := New(Options{Path: path, Backend: "cpu", Threads: 2, Context: 512, StateDir: states, StateBudget: 1000})
	t.Cleanup(e.Close)
	waitFor[Loaded](t, e)
	s := &session{t: t, e: e, id: 1}
	s.turn(ask("Hello"))
	e.Close()
	if entries, _ := os.ReadDir(states); len(entries) != 0 {
		t.Errorf("%d files kept in a budget of 1,000 bytes", len(entries))
	}
}

// Pruning leaves what is not a state, and a save in progress (another
// chat's), but not one a crash left long ago.
func TestPruneKeepsOthersFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, age time.Duration) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	write("notes.txt", 0)
	write("3.kvstate", 0)
	write("4.kvstate", 0)
	write(".3.kvstate.tmp-123", 0)
	write(".4.kvstate.tmp-456", 2*time.Hour)
	if err := PruneSavedStates(dir, func(id int64) bool { return id == 3 }); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{".3.kvstate.tmp-123", "3.kvstate", "notes.txt"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if err := PruneSavedStates(filepath.Join(dir, "none"), func(int64) bool { return false }); err != nil {
		t.Errorf("pruning a directory that is not there: %v", err)
	}
}

// A deleted session's state goes, and the conversation in the cache is
// not saved under it when the chat closes.
func TestForgetSession(t *testing.T) {
	dir := t.TempDir()
	path, states := qwen3Path(t, dir, 3), filepath.Join(dir, "state")
	chatThenClose(t, path, states, 512, 4, ask("Hello"))
	s := openSession(t, path, states, 512, 4)
	s.turn(ask("Hello again"))
	s.e.ForgetSession(4)
	s.e.Close()
	if _, err := os.Stat(StatePath(states, 4)); err == nil {
		t.Error("a deleted session's state is still there")
	}
}
