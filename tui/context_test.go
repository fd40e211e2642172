package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// A chat whose context fills is warned once, then told (once per change)
// which turns the model no longer sees and what to do; the reply streaming
// meanwhile stays whole.
func TestContextFillingAndTrimming(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 100, 40)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	send := func(prompt string, evs ...engine.Event) {
		t.Helper()
		typeText(m, prompt)
		press(m, tea.KeyEnter)
		m.Update(engineMsg{events: evs})
		m.Update(frameMsg{})
	}
	send("one", engine.Token{Text: "first answer"},
		engine.Done{Reason: "stop", Stats: engine.Stats{ContextUsed: 40, ContextSize: 128}})
	lacks(t, m.View(), "context is")
	send("two", engine.Token{Text: "second answer"},
		engine.Done{Reason: "stop", Stats: engine.Stats{ContextUsed: 100, ContextSize: 128}})
	contains(t, m.View(), "The context is 78% full (100 of 128 tokens)")
	contains(t, m.View(), "gives more room")

	trim := engine.ContextTrimmed{Dropped: 2, Tokens: 50, Context: 128}
	send("three", trim, engine.Token{Text: "third "}, engine.Token{Text: "answer"},
		engine.Done{Reason: "stop", Stats: engine.Stats{ContextUsed: 70, ContextSize: 128}})
	v := plain(m.View())
	contains(t, v, "does not see the oldest 2 message(s)")
	if !strings.Contains(v, "third answer") {
		t.Errorf("the reply streamed around the notice is not whole:\n%s", v)
	}
	if last := m.conv.entries[len(m.conv.entries)-1]; last.kind != entryAssistant || last.content != "third answer" {
		t.Errorf("last entry = %+v, want the reply", last)
	}
	// The same window again says nothing new.
	send("four", trim, engine.Token{Text: "fourth"}, engine.Done{Reason: "stop"})
	if n := strings.Count(plain(m.View()), "does not see the oldest"); n != 1 {
		t.Errorf("the trim notice shows %d times, want once", n)
	}
	// The model never sees notices.
	for _, msg := range m.conv.Messages() {
		if strings.Contains(msg.Content, "context") {
			t.Errorf("a notice reached the model: %+v", msg)
		}
	}
}

// statusBar is the view's last line, the status line.
func statusBar(m *Model) string {
	lines := strings.Split(plain(m.View()), "\n")
	return lines[len(lines)-1]
}

// Status-line notes go after noteLifetime (a tea.Tick message, not a
// sleep), a newer note outliving an older one's tick; the context warning
// stays while it holds, past any tick, and goes with a new chat.
func TestNoticesExpireButWarningsHold(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 120, 30)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "/think on")
	press(m, tea.KeyEnter)
	if !strings.Contains(statusBar(m), "thinking on") {
		t.Fatalf("no note: %q", statusBar(m))
	}
	old := m.noteID
	typeText(m, "/think off")
	press(m, tea.KeyEnter)
	m.Update(noteExpiredMsg{id: old})
	if !strings.Contains(statusBar(m), "thinking off") {
		t.Fatalf("an older note's tick cleared the newer note: %q", statusBar(m))
	}
	m.Update(noteExpiredMsg{id: m.noteID})
	if strings.Contains(statusBar(m), "thinking") {
		t.Fatalf("the note outstayed its tick: %q", statusBar(m))
	}

	send := func(prompt string, evs ...engine.Event) {
		t.Helper()
		typeText(m, prompt)
		press(m, tea.KeyEnter)
		m.Update(engineMsg{events: evs})
		m.Update(frameMsg{})
	}
	send("one", engine.Token{Text: "a"}, engine.Done{Reason: "stop", Stats: engine.Stats{ContextUsed: 100, ContextSize: 128}})
	m.Update(noteExpiredMsg{id: m.noteID})
	if !strings.Contains(statusBar(m), "context 78% full") {
		t.Fatalf("no standing context warning: %q", statusBar(m))
	}
	send("two", engine.ContextTrimmed{Dropped: 2, Tokens: 50, Context: 128}, engine.Token{Text: "b"},
		engine.Done{Reason: "stop", Stats: engine.Stats{ContextUsed: 90, ContextSize: 128}})
	m.Update(noteExpiredMsg{id: m.noteID})
	if !strings.Contains(statusBar(m), "oldest 2 message(s) out of the model's view") {
		t.Fatalf("the warning does not say the oldest turns are left out: %q", statusBar(m))
	}
	typeText(m, "/new")
	press(m, tea.KeyEnter)
	m.Update(noteExpiredMsg{id: m.noteID})
	if strings.Contains(statusBar(m), "context") && strings.Contains(statusBar(m), "full") {
		t.Fatalf("the warning outlived the chat it was about: %q", statusBar(m))
	}
}

// The status line never contradicts itself: the trimming warning does not
// call a context "full" that the gauge shows a third used, the context
// gauge keeps the last reply's figure while the next prompt is read (never
// 0), and the KV total is the model's allocation idle and generating alike.
func TestStatusLineAgreesWithItself(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 140, 30)
	info := fakeengine.DefaultInfo
	info.ContextSize, info.KVAllocBytes = 256, 455<<20
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: info}}})
	if bar := statusBar(m); !strings.Contains(bar, "ctx 0/256") || !strings.Contains(bar, "/455 MiB") {
		t.Fatalf("idle: %q", bar)
	}
	typeText(m, "one")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{engine.ContextTrimmed{Dropped: 10, Tokens: 90, Context: 256},
		engine.Token{Text: "a"}, engine.Done{Reason: "stop", Stats: engine.Stats{DecodeTokens: 6, DecodeTPS: 40,
			ContextUsed: 96, ContextSize: 256, KVUsedBytes: 168 << 20, KVAllocBytes: 448 << 20}}}})
	m.Update(noteExpiredMsg{id: m.noteID})
	bar := statusBar(m)
	if strings.Contains(bar, "full") || !strings.Contains(bar, "ctx 96/256") || !strings.Contains(bar, "KV 168 MiB/455 MiB") {
		t.Fatalf("after a trimmed reply: %q", bar)
	}
	typeText(m, "two")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{engine.PrefillProgress{Done: 10, Total: 500}}})
	if bar := statusBar(m); !strings.Contains(bar, "ctx 96/256") || strings.Contains(bar, "40.0 tok/s") {
		t.Fatalf("reading the next prompt: %q, want the last context gauge and no old speed", bar)
	}
}

// A reply that fails before its first token shows no numbers, never the
// reply before's.
func TestFailedReplyShowsNoOldNumbers(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 100, 30)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "one")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{engine.Token{Text: "fine"},
		engine.Stats{DecodeTokens: 14, DecodeTPS: 449.2, TTFT: 11300 * time.Microsecond, ContextUsed: 30, ContextSize: 4096},
		engine.Done{Reason: "stop", Stats: engine.Stats{DecodeTokens: 14, DecodeTPS: 449.2, TTFT: 11300 * time.Microsecond, ContextUsed: 30, ContextSize: 4096}}}})
	contains(t, m.View(), "14 tokens · 449.2 tok/s")
	typeText(m, "two")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{engine.Error{Err: errors.New("context full: the conversation has 5000 tokens")}}})
	if n := strings.Count(plain(m.View()), "14 tokens · 449.2 tok/s"); n != 1 {
		t.Fatalf("the failed reply shows the last reply's numbers (%d times):\n%s", n, plain(m.View()))
	}
}

// A resumed chat's gauge shows the conversation's size as soon as the model
// is loaded, not 0 until the next reply.
func TestResumedChatShowsItsContext(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	info, err := store.Create(ctx, session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	store.Add(ctx, info.ID, session.Message{Role: chat.RoleUser, Content: "one two three"})
	store.Add(ctx, info.ID, session.Message{Role: chat.RoleAssistant, Content: "four five"})
	sess, err := store.Load(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	fe := countingEngine{fakeengine.New(fakeengine.Options{})}
	m, _, _ := newTestModel(t, Options{Engine: fe, Store: store, Resume: sess}, 120, 30)
	cmd := m.onEvent(engine.Loaded{Info: fakeengine.DefaultInfo})
	if cmd == nil {
		t.Fatal("nothing measures the resumed chat")
	}
	m.Update(cmd())
	if bar := statusBar(m); !strings.Contains(bar, "ctx 9/4096") {
		t.Errorf("resumed chat: %q, want its 9 tokens", bar)
	}
}

// At 80 columns a long title is cut before the model and backend leave the
// header, and the title never runs into the model's name.
func TestHeaderKeepsModelAndBackend(t *testing.T) {
	st := DefaultStyles()
	info := fakeengine.DefaultInfo
	info.Variant, info.Name = "Qwen3 (other)", "bonsai-synth tiny q1_0 seed 1"
	for _, title := range []string{"hello there", "Tell me everything about the history of bonsai trees in Japan and China"} {
		for _, w := range []int{80, 100, 120} {
			h := plain(header(&st, w, title, &info, "think off"))
			if lipgloss.Width(h) > w || !strings.Contains(h, "bonsai-synth tiny q1_0 seed 1") || !strings.Contains(h, "cpu avx2") {
				t.Errorf("width %d, title %q: header %q lacks the model or backend", w, title, h)
			}
			before, _, _ := strings.Cut(h, "bonsai-synth")
			if !strings.HasSuffix(before, "   ") {
				t.Errorf("width %d: the title runs into the model: %q", w, h)
			}
		}
	}
	// Very narrow: the backend stays longest.
	if h := plain(header(&st, 40, "a long title here", &info, "think off")); !strings.Contains(h, "cpu avx2") || lipgloss.Width(h) > 40 {
		t.Errorf("at 40 columns: %q", h)
	}
}

// Wrapped notices never split a flag such as --ctx over two lines.
func TestNoticesKeepFlagsWhole(t *testing.T) {
	for w := 50; w <= 100; w++ {
		m, _, _ := newTestModel(t, Options{}, w, 30)
		m.contextTrimmed(engine.ContextTrimmed{Dropped: 3, Tokens: 50, Context: 128})
		v := plain(m.View())
		if !strings.Contains(v, "--ctx") || strings.Contains(v, "-\n") || strings.Contains(v, "- \n") {
			t.Fatalf("width %d: --ctx split:\n%s", w, v)
		}
	}
}

// An error too long for the status line is kept whole in the transcript,
// where it does not expire; a short one stays on the status line only.
func TestLongErrorsStayInTheTranscript(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 30)
	long := "model \"bonsai-8b\": not downloaded; 'bonsai pull bonsai-8b' fetches it (5.1 GB), or name a GGUF file"
	m.notify(long, true)
	m.Update(noteExpiredMsg{id: m.noteID})
	if v := strings.Join(strings.Fields(plain(m.View())), " "); !strings.Contains(v, "or name a GGUF file") {
		t.Fatalf("the long error is gone:\n%s", plain(m.View()))
	}
	n := len(m.conv.entries)
	m.notify("no reply to copy yet", true)
	if len(m.conv.entries) != n {
		t.Error("a short error was added to the transcript")
	}
}
