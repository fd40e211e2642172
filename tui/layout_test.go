package tui

import (
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// A narrow terminal with both panels open still shows the chat (at least
// half the rows), and a wide one keeps the text to a readable width.
func TestLayoutAtNarrowAndWideTerminals(t *testing.T) {
	long := strings.Repeat("a rather long sentence that goes on ", 12)
	for _, w := range []int{60, 79, 200} {
		m, _, _ := newTestModel(t, Options{}, w, 30)
		m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
		m.showBackend, m.showProfile = true, true
		m.layout()
		typeText(m, long)
		press(m, tea.KeyEnter)
		m.Update(engineMsg{events: []engine.Event{engine.Token{Text: long}, engine.Done{Reason: "stop"}}})
		m.Update(frameMsg{})
		a := m.arrange()
		if w < narrowWidth && a.convH < a.mainH/2 {
			t.Errorf("%d columns: the panels leave the chat %d of %d rows", w, a.convH, a.mainH)
		}
		for _, line := range strings.Split(m.conv.View(), "\n") {
			if n := lipgloss.Width(strings.TrimRight(plain(line), " ")); n > maxTextWidth+len(bodyIndent) {
				t.Errorf("%d columns: a transcript line runs %d columns: %q", w, n, plain(line))
				break
			}
		}
	}
}
