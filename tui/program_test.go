package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
)

// newProgram runs the chat in a real bubbletea program on a fake terminal.
func newProgram(t *testing.T, fe *fakeengine.Engine, opts Options, w, h int) (*teatest.TestModel, *Model) {
	t.Helper()
	opts.Engine = fe
	opts.Profile = termenv.Ascii
	opts.Dark = true
	opts.Clipboard = func(string) (string, error) { return "", nil }
	m := New(opts)
	t.Cleanup(func() {
		m.Close()
		fe.Close()
	})
	return teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h)), m
}

func waitFor(t *testing.T, tm *teatest.TestModel, want string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(want)) },
		teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

// TestProgramStreamStopQuit drives the whole program: load, send, watch the
// reply stream, stop it with esc, toggle both panels, resize, quit with a
// double ctrl+c.
func TestProgramStreamStopQuit(t *testing.T) {
	fe := fakeengine.New(fakeengine.Options{TokenDelay: 3 * time.Millisecond, Profile: true,
		Replies: []fakeengine.Reply{
			{Content: "Short answer."},
			{Content: strings.Repeat("streaming ", 500)},
		}})
	tm, m := newProgram(t, fe, Options{}, 80, 30)
	waitFor(t, tm, "ready")
	tm.Type("first")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitFor(t, tm, "Short answer.")
	tm.Type("second")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitFor(t, tm, "streaming streaming")
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	waitFor(t, tm, "stopped")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlB})
	waitFor(t, tm, "Fake CPU")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlP})
	waitFor(t, tm, "fake timers")
	tm.Send(tea.WindowSizeMsg{Width: 140, Height: 40})
	waitFor(t, tm, "Profile")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	if fe.Stops() == 0 {
		t.Error("esc never reached the engine")
	}
	last := m.conv.entries[len(m.conv.entries)-1]
	if !last.stopped || !strings.HasPrefix(last.content, "streaming") {
		t.Errorf("last reply stopped=%v %q…", last.stopped, last.content[:min(len(last.content), 30)])
	}
}

// TestProgramRegenerateAndEdit checks the keys for regenerate and edit in
// a running program.
func TestProgramRegenerateAndEdit(t *testing.T) {
	fe := fakeengine.New(fakeengine.Options{})
	tm, _ := newProgram(t, fe, Options{}, 80, 24)
	waitFor(t, tm, "ready")
	tm.Type("question")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitFor(t, tm, "Reply 1 to: question")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlR})
	waitFor(t, tm, "Reply 2 to: question")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlX})
	waitFor(t, tm, "editing the last prompt")
	tm.Type(" again")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitFor(t, tm, "Reply 3 to: question again")
	tm.Send(tea.KeyMsg{Type: tea.KeyCtrlD})
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	if n := len(fe.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}
