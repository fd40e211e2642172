package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// "?" on an empty input opens the help, as the README says; in text it is
// text, and it is never sent as a message.
func TestQuestionMarkOpensHelp(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 100, 40)
	loaded(t, m, fe)
	typeText(m, "?")
	if m.overlay != overlayHelp {
		t.Fatalf("? on an empty input did not open the help")
	}
	if m.input.Value() != "" {
		t.Errorf("? reached the input: %q", m.input.Value())
	}
	press(m, tea.KeyEsc)
	typeText(m, "why?")
	if m.overlay != overlayNone || m.input.Value() != "why?" {
		t.Errorf("? inside text: overlay %v, input %q", m.overlay, m.input.Value())
	}
	if len(fe.Requests()) != 0 {
		t.Errorf("a message was sent: %+v", fe.Requests())
	}
}

// The help box uses its width: no line is cut while there is room, and the
// theme setting is in it.
func TestHelpShowsWholeLines(t *testing.T) {
	for _, w := range []int{80, 100, 140, 200} {
		m, fe, _ := newTestModel(t, Options{}, w, 80)
		loaded(t, m, fe)
		typeText(m, "?")
		v := m.View()
		contains(t, v, "/model [NAME|FILE]")
		contains(t, v, "pick from a list, or load one")
		contains(t, v, `theme = "dark"`)
		for _, line := range strings.Split(plain(v), "\n") {
			if strings.Contains(line, "║") && strings.Contains(line, "…") {
				t.Errorf("at %d columns the help cuts %q", w, line)
			}
		}
	}
}

// Ctrl+T says why nothing happens when there is no thinking to show.
func TestToggleThinkingWithoutThinking(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 100, 30)
	loaded(t, m, fe)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlT})
	contains(t, m.View(), "no thinking in this chat")
	if m.conv.thinkOpen {
		t.Error("folding state changed with nothing to fold")
	}
}
