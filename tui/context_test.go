package tui

import (
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
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
	if !strings.Contains(statusBar(m), "oldest 2 message(s) left out") {
		t.Fatalf("the warning does not say the oldest turns are left out: %q", statusBar(m))
	}
	typeText(m, "/new")
	press(m, tea.KeyEnter)
	m.Update(noteExpiredMsg{id: m.noteID})
	if strings.Contains(statusBar(m), "context") && strings.Contains(statusBar(m), "full") {
		t.Fatalf("the warning outlived the chat it was about: %q", statusBar(m))
	}
}
