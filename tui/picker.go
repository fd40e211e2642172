package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/hub"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// modelItem is one row of the /model picker.
type modelItem struct {
	label   string
	detail  string
	path    string // the file to load; "" for a registry model not downloaded
	pull    string // the registry name to pull, when not downloaded
	current bool
}

// modelPicker is the list /model opens: the models bonsai knows, the one
// running first, then recent files, the models directory's files and the
// registry's models not downloaded yet.
type modelPicker struct {
	items   []modelItem
	cursor  int
	loading bool
	err     string
	running string // the running model, described
}

// modelListMsg carries the picker's list, gathered off the UI goroutine
// (it reads directories and file headers).
type modelListMsg struct {
	items []modelItem
	err   error
}

func (m *Model) modelsDir() string {
	if m.opts.ModelsDir != "" {
		return m.opts.ModelsDir
	}
	return hub.DefaultDir()
}

// openPicker opens the /model list; the files are looked at in a command,
// never in Update.
func (m *Model) openPicker() tea.Cmd {
	m.overlay = overlayModels
	m.picker = modelPicker{loading: true}
	current := ""
	if i := m.info; i != nil {
		current = i.Path
		file := filepath.Base(i.Path)
		if strings.HasPrefix(i.Path, "(embedded)") {
			file = "built in"
		}
		m.picker.running = fmt.Sprintf("running %s (%s): %s, %s, %s params, %d-token context on %s",
			i.Name, file, i.Variant, i.Arch, formatCount(i.Params), i.ContextSize, i.Backend)
	}
	recent := append([]string(nil), m.state.RecentModels...)
	dir := m.modelsDir()
	builtin := m.opts.BuiltinModel
	return func() tea.Msg { return listModels(current, builtin, recent, dir) }
}

// listModels gathers the picker's rows: the running model, the built-in
// one, recent files that still exist, the models directory's complete
// files, and the registry's models not downloaded there.
func listModels(current, builtin string, recent []string, dir string) modelListMsg {
	var items []modelItem
	seen := map[string]bool{}
	key := func(p string) string {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	add := func(it modelItem) {
		if it.path != "" {
			if seen[key(it.path)] {
				return
			}
			seen[key(it.path)] = true
		}
		items = append(items, it)
	}
	if current != "" {
		add(modelItem{label: filepath.Base(current), detail: "running now", path: current, current: true})
		if strings.HasPrefix(current, "(embedded)") {
			items[0].label = strings.TrimSpace(strings.TrimPrefix(current, "(embedded)"))
			items[0].detail = "running now (built in)"
		}
	}
	if builtin != "" && builtin != current {
		add(modelItem{label: builtinName(builtin), detail: "built in", path: builtin})
	}
	for _, p := range recent {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			add(modelItem{label: filepath.Base(p), detail: "recent · " + formatBytes(st.Size()) + " · " + filepath.Dir(p), path: p})
		}
	}
	local, err := hub.List(dir)
	have := map[string]bool{}
	for _, l := range local {
		if l.Partial {
			continue
		}
		label, detail := filepath.Base(l.Path), "downloaded · "+formatBytes(l.Size)
		if l.Model != nil {
			have[l.Model.Name] = true
			label, detail = l.Model.Name, detail+" · "+filepath.Base(l.Path)
		}
		add(modelItem{label: label, detail: detail, path: l.Path})
	}
	for _, r := range hub.Registry {
		if !have[r.Name] {
			add(modelItem{label: r.Name, detail: "not downloaded: bonsai pull " + r.Name + " · " + r.Summary, pull: r.Name})
		}
	}
	return modelListMsg{items: items, err: err}
}

// builtinName is the built-in model's name, from its path.
func builtinName(path string) string {
	return strings.TrimSpace(strings.TrimPrefix(path, "(embedded)"))
}

func (m *Model) modelsListed(msg modelListMsg) tea.Cmd {
	if m.overlay != overlayModels {
		return nil // closed while the list was gathered
	}
	m.picker.loading = false
	m.picker.items = msg.items
	if msg.err != nil {
		m.picker.err = msg.err.Error()
	}
	// Start on the first model that can be loaded, not the running one.
	for i, it := range msg.items {
		if !it.current && it.path != "" {
			m.picker.cursor = i
			break
		}
	}
	return nil
}

// pickerKey moves through the list, loads the chosen model (enter) or
// closes the list (esc).
func (m *Model) pickerKey(msg tea.KeyMsg) tea.Cmd {
	p := &m.picker
	switch msg.String() {
	case "esc", "q":
		m.overlay = overlayNone
	case "up", "k":
		p.cursor = max(p.cursor-1, 0)
	case "down", "j":
		p.cursor = min(p.cursor+1, max(len(p.items)-1, 0))
	case "home":
		p.cursor = 0
	case "end":
		p.cursor = max(len(p.items)-1, 0)
	case "enter":
		if p.loading || p.cursor >= len(p.items) {
			return nil
		}
		it := p.items[p.cursor]
		switch {
		case it.current:
			m.overlay = overlayNone
			return m.notify("already running "+it.label, false)
		case it.path == "":
			return m.notify(fmt.Sprintf("%s is not downloaded: run 'bonsai pull %s' in a shell", it.pull, it.pull), true)
		}
		m.overlay = overlayNone
		return m.switchModel(it.path)
	}
	return nil
}

// View draws the list in a box width wide and at most height tall.
func (p *modelPicker) View(st *Styles, width, height int) string {
	inner := max(width-6, 20)
	var b strings.Builder
	b.WriteString(st.PanelHead.Render("Models"))
	b.WriteString(st.Dim.Render("  ↑↓ choose · enter load · esc cancel · /model NAME|FILE loads any") + "\n")
	if p.running != "" {
		b.WriteString(st.Dim.Render(truncate(p.running, inner)) + "\n")
	}
	switch {
	case p.loading:
		b.WriteString(st.Dim.Render("looking for models…"))
	case len(p.items) == 0:
		b.WriteString(st.Dim.Render("no models found"))
	}
	if p.err != "" {
		b.WriteString(st.Error.Width(inner).Render(p.err) + "\n")
	}
	rows := max(height-5, 3)
	first := 0
	if p.cursor >= rows {
		first = p.cursor - rows + 1
	}
	for i := first; i < len(p.items) && i < first+rows; i++ {
		it := p.items[i]
		mark := "  "
		switch {
		case i == p.cursor:
			mark = "› "
		case it.current:
			mark = "• "
		}
		labelW := min(max(inner/3, 16), inner-10)
		label := truncate(printable(it.label), labelW)
		line := mark + label + strings.Repeat(" ", max(labelW-lipgloss.Width(label), 0)+2)
		line += truncate(printable(it.detail), max(inner-lipgloss.Width(line), 4))
		if i == p.cursor {
			line = st.Selected.Render(xansiStrip(line))
		} else if it.path == "" {
			line = st.Dim.Render(line)
		}
		b.WriteString(line + "\n")
	}
	return st.Overlay.Width(width - 2).Render(strings.TrimRight(b.String(), "\n"))
}
