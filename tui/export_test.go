package tui

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// /export in a chat that is saved writes the stored session, as `bonsai
// export` does: the session's own start and backend, and each message's
// time, model and backend.
func TestExportWritesTheStoredSession(t *testing.T) {
	store := openStore(t)
	dir := t.TempDir()
	m, fe, _ := newTestModel(t, Options{Store: store, ExportDir: dir}, 100, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "export me")
	settle(m)
	typeText(m, "/export chat.json")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if cmd != nil {
		m.Update(runCmd(cmd))
	}
	settle(m)
	contains(t, m.View(), "exported to")

	data, err := os.ReadFile(filepath.Join(dir, "chat.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Backend  string    `json:"backend"`
		Created  time.Time `json:"created"`
		Messages []struct {
			Content string    `json:"content"`
			Model   string    `json:"model"`
			Backend string    `json:"backend"`
			Created time.Time `json:"created"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	stored, err := store.Load(context.Background(), m.sessionID)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.Created.Equal(stored.Created) || doc.Backend != stored.Backend || len(doc.Messages) != len(stored.Turns) {
		t.Fatalf("export's session (created %v, backend %q, %d messages) is not the stored one (%v, %q, %d):\n%s",
			doc.Created, doc.Backend, len(doc.Messages), stored.Created, stored.Backend, len(stored.Turns), data)
	}
	for i, msg := range doc.Messages {
		want := stored.Turns[i]
		if !msg.Created.Equal(want.Created) || msg.Model != want.Model || msg.Backend != want.Backend || msg.Model == "" {
			t.Errorf("message %d: created %v, model %q, backend %q; stored %v, %q, %q",
				i, msg.Created, msg.Model, msg.Backend, want.Created, want.Model, want.Backend)
		}
	}
}

// A file name whose extension names no export format is refused, and
// nothing is written.
func TestExportRefusesAnUnknownExtension(t *testing.T) {
	dir := t.TempDir()
	m, fe, _ := newTestModel(t, Options{ExportDir: dir}, 100, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "export me")
	typeText(m, "/export x.txt")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	if cmd != nil {
		m.Update(runCmd(cmd))
	}
	contains(t, m.View(), `".txt"`)
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x.txt was written: %v", err)
	}
}
