package tui

import (
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/engine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"
)

// TestPanelTogglesDuringAReplyOnTheRealEngine: on the real engine (the
// embedded model), toggling the profile panel a hundred times while a reply
// streams never blocks Update, and Esc then stops the reply promptly.
func TestPanelTogglesDuringAReplyOnTheRealEngine(t *testing.T) {
	f, err := defaultmodel.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eng := engine.New(engine.Options{File: f, Backend: "cpu", Threads: 2, Context: 1024})
	defer eng.Close()
	m := New(Options{Engine: eng, Profile: termenv.Ascii, Dark: true,
		Sampling:  func(engine.Sampling) engine.Sampling { return engine.Sampling{Temperature: 1, Seed: 3} },
		Clipboard: func(string) (string, error) { return "test", nil }, Now: func() time.Time { return fixedNow }})
	defer m.Close()
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	pumpLive := func(cond func() bool) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for !cond() {
			select {
			case ev, ok := <-eng.Events():
				if !ok {
					t.Fatal("engine events closed")
				}
				m.Update(engineMsg{events: []engine.Event{ev}})
				m.Update(frameMsg{})
			case <-deadline:
				t.Fatalf("timed out; view:\n%s", plain(m.View()))
			}
		}
	}
	pumpLive(func() bool { return m.info != nil })
	typeText(m, "Tell me a very long story")
	press(m, tea.KeyEnter)
	pumpLive(func() bool { return m.status.stats.DecodeTokens >= 2 })

	var slowest time.Duration
	for range 100 {
		t0 := time.Now()
		m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
		slowest = max(slowest, time.Since(t0))
	}
	if slowest > 50*time.Millisecond {
		t.Errorf("a panel toggle during a reply blocked Update for %v", slowest)
	}
	t0 := time.Now()
	press(m, tea.KeyEsc)
	if d := time.Since(t0); d > 50*time.Millisecond {
		t.Errorf("Esc blocked Update for %v", d)
	}
	pumpLive(func() bool { return !m.generating })
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("the reply ended %v after Esc", d)
	}
}
