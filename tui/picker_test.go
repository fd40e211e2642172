package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/config"
	tea "github.com/charmbracelet/bubbletea"
)

// /model with no argument opens a list of the models bonsai knows: the
// running one, recent files, the models directory's and the registry's.
// The files are looked at in a command, not in Update; arrows and enter
// load one, esc leaves the running model alone.
func TestModelPicker(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	write := func(p string) string {
		if err := os.WriteFile(p, []byte("GGUF"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(filepath.Join(dir, "Bonsai-1.7B-Q1_0.gguf"))
	mine := write(filepath.Join(dir, "mine.gguf"))
	recent := write(filepath.Join(elsewhere, "recent-model.gguf"))
	state := &config.State{RecentModels: []string{recent, filepath.Join(elsewhere, "gone.gguf")}}
	const builtin = "(embedded) bonsai-tiny"
	m, fe, _ := newTestModel(t, Options{ModelsDir: dir, State: state, BuiltinModel: builtin}, 110, 30)
	loaded(t, m, fe)

	typeText(m, "/model")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	contains(t, m.View(), "looking for models…") // Update returned before any file was read
	run(m, cmd)
	v := plain(m.View())
	for _, w := range []string{"Models", "running now", "recent-model.gguf", "recent ·", "mine.gguf", "downloaded ·",
		"downloaded · 4 B · Bonsai-1.7B-Q1_0.gguf", "not downloaded: bonsai pull bonsai-4b", "enter load"} {
		contains(t, v, w)
	}
	lacks(t, v, "gone.gguf")
	lacks(t, v, "not downloaded: bonsai pull bonsai-1.7b ")

	press(m, tea.KeyEsc)
	if m.overlay != overlayNone || m.loadingModel != "" {
		t.Fatalf("esc did not cancel: overlay %v, loading %q", m.overlay, m.loadingModel)
	}

	// Choose mine.gguf with the arrows.
	typeText(m, "/model")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	for range len(m.picker.items) {
		if m.picker.items[m.picker.cursor].path == mine {
			break
		}
		press(m, tea.KeyDown)
	}
	if it := m.picker.items[m.picker.cursor]; it.path != mine {
		t.Fatalf("the arrows never reached mine.gguf; at %+v", it)
	}
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	pump(t, m, fe, func() bool { return m.info != nil && m.info.Path == mine })
	contains(t, m.View(), "Now running mine.gguf")
	if len(m.state.RecentModels) == 0 || m.state.RecentModels[0] != mine {
		t.Errorf("recent models %q do not start with the one loaded", m.state.RecentModels)
	}

	// With another model running, the built-in one is offered, and
	// choosing it asks the engine for it by its path.
	typeText(m, "/model")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	contains(t, plain(m.View()), "bonsai-tiny")
	for range len(m.picker.items) {
		if m.picker.items[m.picker.cursor].path == builtin {
			break
		}
		press(m, tea.KeyDown)
	}
	if it := m.picker.items[m.picker.cursor]; it.path != builtin || it.detail != "built in" {
		t.Fatalf("no built-in row to choose; at %+v", it)
	}
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	if m.loadingModel != builtin {
		t.Errorf("choosing the built-in model loads %q, want %q", m.loadingModel, builtin)
	}
	// So does /model with its name.
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEsc})
	run(m, cmd)
	m.loadingModel = ""
	typeText(m, "/model bonsai-tiny")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	if m.loadingModel != builtin {
		t.Errorf("/model bonsai-tiny loads %q, want %q", m.loadingModel, builtin)
	}
	pump(t, m, fe, func() bool { return !m.generating })

	// A registry model not downloaded says how to get it and stays open.
	typeText(m, "/model")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	press(m, tea.KeyEnd)
	if it := m.picker.items[m.picker.cursor]; it.pull == "" {
		t.Fatalf("the last row %+v is not a registry model to pull", it)
	}
	press(m, tea.KeyEnter)
	if m.overlay != overlayModels || !strings.Contains(m.status.note, "bonsai pull") {
		t.Errorf("choosing a model not downloaded: overlay %v, note %q", m.overlay, m.status.note)
	}
}
