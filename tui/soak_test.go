package tui

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	tea "github.com/charmbracelet/bubbletea"
)

// The chat through 1,000 turns of random stops, regenerates, edits and
// backend switches, saving to a real database; then, as `bonsai -c` does,
// the last session is loaded: every message on the screen is stored once,
// in order, complete, and a chat resumed from it shows the same.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const turns = 1000
	rng := rand.New(rand.NewPCG(13, 1))
	store, err := session.OpenWith(filepath.Join(t.TempDir(), "bonsai.db"), session.Options{FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, fe, _ := newTestModel(t, Options{Store: store, System: "be brief"}, 100, 30)
	loaded(t, m, fe)
	words := strings.Fields("in the beginning was the word and the word was with god a bonsai tree grows slowly")
	prompt := func(i int) string {
		n := 1 + rng.IntN(30)
		var b strings.Builder
		fmt.Fprintf(&b, "turn %d:", i)
		for range n {
			b.WriteString(" " + words[rng.IntN(len(words))])
		}
		return b.String()
	}
	// reply starts a reply and, one time in four, stops it at a random
	// point of its stream.
	reply := func() {
		if rng.IntN(4) == 0 {
			for n := rng.IntN(8); n > 0 && m.generating; n-- {
				m.Update(engineMsg{events: []engine.Event{<-fe.Events()}})
			}
			press(m, tea.KeyEsc)
		}
		idle(t, m, fe)
	}
	backends := []string{"cpu", "gpu"}
	regens, edits, switches := 0, 0, 0
	for i := range turns {
		switch r := rng.IntN(100); {
		case r < 12 && i > 0: // regenerate the last reply
			m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
			regens++
			reply()
		case r < 20 && i > 0: // edit the last prompt and send it again
			m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
			typeText(m, " (edited)")
			press(m, tea.KeyEnter)
			edits++
			reply()
		case r < 25: // switch the backend
			typeText(m, "/backend "+backends[switches%2])
			press(m, tea.KeyEnter)
			switches++
			pump(t, m, fe, func() bool { return m.backend.switching == "" && m.status.phase == phaseReady })
		default:
			m.input.SetValue(prompt(i))
			press(m, tea.KeyEnter)
			reply()
		}
		if i%100 == 0 {
			settle(m)
		}
	}
	settle(m)
	want := shown(m)
	m.Close()
	t.Logf("%d turns: %d messages on screen, %d regenerates, %d edits, %d backend switches", turns, len(want), regens, edits, switches)

	sess, err := store.Last(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sess.ID != m.sessionID {
		t.Fatalf("-c loads session %d, the chat was %d", sess.ID, m.sessionID)
	}
	sameTurns(t, "stored vs screen", storedTurns(t, store, sess.ID), want)
	stopped := 0
	seen := map[int64]bool{}
	for _, msg := range sess.Turns {
		if msg.Stopped {
			stopped++
		}
		if seen[msg.ID] {
			t.Fatalf("message %d stored twice", msg.ID)
		}
		seen[msg.ID] = true
	}
	if stopped == 0 {
		t.Error("no reply was stopped mid-stream: the soak does not exercise stops")
	}
	t.Logf("%d stored replies were stopped", stopped)
	resumed, fe2, _ := newTestModel(t, Options{Store: store, Resume: sess}, 100, 30)
	loaded(t, resumed, fe2)
	sameTurns(t, "resumed screen vs first screen", shown(resumed), want)
}
