package tui

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"
)

// panickyEngine loads at once and panics when asked to generate: a bug deep
// in the UI's call path.
type panickyEngine struct{ events chan engine.Event }

func (p panickyEngine) Events() <-chan engine.Event   { return p.events }
func (panickyEngine) Generate(engine.GenerateRequest) { panic("boom") }
func (panickyEngine) Stop()                           {}
func (panickyEngine) SwitchBackend(string)            {}
func (panickyEngine) SwitchModel(string)              {}
func (panickyEngine) Reset()                          {}
func (panickyEngine) Close()                          {}

// slowInput types its text after a pause, once the model has loaded.
type slowInput struct {
	text string
	done bool
}

func (s *slowInput) Read(p []byte) (int, error) {
	if s.done {
		time.Sleep(time.Hour) // stay open like a terminal
		return 0, io.EOF
	}
	time.Sleep(200 * time.Millisecond)
	s.done = true
	return copy(p, s.text), nil
}

// TestRunSurvivesPanic checks that a panic inside Update does not take the
// process down: bubbletea recovers it, restores the terminal (leaves the alt
// screen, shows the cursor) and Run reports an error.
func TestRunSurvivesPanic(t *testing.T) {
	ev := make(chan engine.Event, 1)
	ev <- engine.Loaded{Info: fakeengine.DefaultInfo}
	var out bytes.Buffer
	err := Run(Options{Engine: panickyEngine{ev}, Profile: termenv.Ascii},
		tea.WithInput(&slowInput{text: "hi\r"}), tea.WithOutput(&out))
	if !errors.Is(err, tea.ErrProgramPanic) {
		t.Fatalf("Run returned %v, want a panic error", err)
	}
	screen := out.String()
	if !strings.Contains(screen, "\x1b[?1049l") || !strings.Contains(screen, "\x1b[?25h") {
		t.Errorf("terminal not restored (alt screen left, cursor shown): %q", screen[max(0, len(screen)-200):])
	}
}
