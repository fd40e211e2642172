package tui

import (
	"errors"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// raw reports a terminal control sequence of the kinds the server sent (the
// view's own styling is plain SGR).
func raw(v string) bool {
	return strings.Contains(v, "\x1b]") || strings.Contains(v, "\x07") || strings.Contains(v, "\x1b[2J")
}

// A remote server's model id and error text are drawn through the
// printable filter in the header, the status line and the backend panel.
func TestRemoteTextIsFiltered(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 120, 30)
	const title = "\x1b]0;pwned\x07"
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: engine.ModelInfo{
		Path: "http://h/v1", Name: "evil" + title, Variant: "evil" + title, Arch: "remote", Backend: "remote", ContextSize: 4096}}}})
	m.showBackend = true
	if v := m.View(); raw(v) || !strings.Contains(v, "evil␛]0;pwned␇") {
		t.Errorf("model id drawn raw:\n%q", v)
	}
	m.Update(engineMsg{events: []engine.Event{engine.Error{Err: errors.New("boom\x1b]52;c;cm0K\x07\x1b[2J")}}})
	if v := m.View(); raw(v) || !strings.Contains(v, "boom␛]52") {
		t.Errorf("error drawn raw:\n%q", v)
	}
}
