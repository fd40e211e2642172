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
