package tui

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	xansi "github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// TestMain pins the colour profile and background so that views (and the
// golden files) are the same in every terminal and CI.
func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	lipgloss.SetHasDarkBackground(true)
	os.Exit(m.Run())
}

var fixedNow = time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)

// newTestModel builds a chat on a fake engine at width×height, without
// starting a program. The copied texts land in *clip.
func newTestModel(t *testing.T, opts Options, width, height int) (*Model, *fakeengine.Engine, *[]string) {
	t.Helper()
	fe, ok := opts.Engine.(*fakeengine.Engine)
	if h, isHolder := opts.Engine.(fakeHolder); isHolder {
		fe, ok = h.fake(), true
	}
	if !ok {
		fe = fakeengine.New(fakeengine.Options{})
		opts.Engine = fe
	}
	var clip []string
	opts.Clipboard = func(s string) (string, error) { clip = append(clip, s); return "to the test clipboard", nil }
	opts.Profile = termenv.Ascii
	opts.Dark = true
	if opts.Now == nil {
		opts.Now = func() time.Time { return fixedNow }
	}
	m := New(opts)
	t.Cleanup(func() {
		m.Close()
		fe.Close()
	})
	m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	return m, fe, &clip
}

// fakeHolder is a test engine built around the fake (to add a method).
type fakeHolder interface{ fake() *fakeengine.Engine }

// pump feeds the fake engine's events to the model until cond holds, running
// the commands that matter synchronously (frame ticks flush immediately).
func pump(t *testing.T, m *Model, fe *fakeengine.Engine, cond func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case ev, ok := <-fe.Events():
			if !ok {
				m.Update(engineMsg{closed: true})
				return
			}
			m.Update(engineMsg{events: []engine.Event{ev}})
			m.Update(frameMsg{})
		case <-deadline:
			t.Fatalf("timed out; view:\n%s", plain(m.View()))
		}
	}
}

// loaded pumps until the fake engine's model is loaded.
func loaded(t *testing.T, m *Model, fe *fakeengine.Engine) {
	t.Helper()
	pump(t, m, fe, func() bool { return m.info != nil })
}

// idle pumps until no reply is streaming.
func idle(t *testing.T, m *Model, fe *fakeengine.Engine) {
	t.Helper()
	pump(t, m, fe, func() bool { return !m.generating })
}

func plain(s string) string { return xansi.Strip(s) }

func typeText(m *Model, s string) {
	for _, r := range s {
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

func press(m *Model, k tea.KeyType) { m.Update(tea.KeyMsg{Type: k}) }

func contains(t *testing.T, view, want string) {
	t.Helper()
	if !strings.Contains(plain(view), want) {
		t.Fatalf("view lacks %q:\n%s", want, plain(view))
	}
}

func lacks(t *testing.T, view, unwanted string) {
	t.Helper()
	if strings.Contains(plain(view), unwanted) {
		t.Fatalf("view has %q:\n%s", unwanted, plain(view))
	}
}
