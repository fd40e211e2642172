package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// sideBySideWidth is the terminal width from which panels sit to the right
// of the conversation instead of under it.
const sideBySideWidth = 110

// narrowWidth is the width below which panels under the conversation may
// take only half its rows.
const narrowWidth = 80

// arrangement is where things go for the current size and toggles.
type arrangement struct {
	mainH       int    // rows between the header and the hint line
	convW       int    // conversation width
	convH       int    // conversation height
	panels      string // the open panels, drawn
	side        bool   // panels to the right of the conversation
	inputHeight int
}

// fixedRows are the header, the hint line, the separator and the status line.
const fixedRows = 4

func (m *Model) arrange() arrangement {
	a := arrangement{inputHeight: m.input.Height()}
	a.mainH = max(m.height-fixedRows-a.inputHeight, 1)
	a.convW, a.convH = m.width, a.mainH
	var views []string
	panelW := m.width
	a.side = m.width >= sideBySideWidth
	if a.side {
		panelW = min(52, m.width/3)
	}
	// Under the conversation: keep at least three rows of conversation;
	// on a narrow terminal, where the panels wrap into many rows, half.
	maxPanel := max(a.mainH-3, 0)
	if a.side {
		maxPanel = a.mainH
	} else if m.width < narrowWidth {
		maxPanel = a.mainH / 2
	}
	m.backend.compact = 0
	if m.showProfile {
		views = append(views, m.prof.View(m.styles, panelW))
	}
	if m.showBackend {
		be := m.backend.View(m.styles, panelW)
		// Both do not fit: the backend's details give way, so that the
		// profile panel is not pushed off the screen.
		for len(views) > 0 && lipgloss.Height(be)+lipgloss.Height(views[0]) > maxPanel && m.backend.compact < backendCompactest {
			m.backend.compact++
			be = m.backend.View(m.styles, panelW)
		}
		views = append([]string{be}, views...)
	}
	if len(views) == 0 {
		return a
	}
	p := lipgloss.JoinVertical(lipgloss.Left, views...)
	if a.side {
		a.panels = clipLines(p, a.mainH)
		a.convW = m.width - lipgloss.Width(a.panels) - 1
		return a
	}
	a.panels = clipLines(p, maxPanel)
	if a.panels != "" {
		a.convH = a.mainH - lipgloss.Height(a.panels)
	}
	return a
}

// clipLines keeps the first n lines of s.
func clipLines(s string, n int) string {
	if n <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// layout sizes the panels for the current window; Update calls it after
// every message (sizes only change the render when they really change).
func (m *Model) layout() {
	if m.width == 0 {
		return
	}
	m.input.SetWidth(m.width)
	a := m.arrange()
	m.conv.SetSize(a.convW, a.convH)
}

// mainView is the area between the header and the input.
func (m *Model) mainView() string {
	a := m.arrange()
	switch {
	case m.overlay == overlayHelp:
		return m.place(m.helpView(), a.mainH)
	case m.overlay == overlaySessions:
		return m.place(m.sessions.View(m.styles, min(m.width-2, 90), a.mainH-2), a.mainH)
	case m.overlay == overlayModels:
		return m.place(m.picker.View(m.styles, min(m.width-2, 100), a.mainH-2), a.mainH)
	case m.info == nil && m.status.phase != phaseFailed && len(m.conv.entries) == 0:
		return m.place(m.loadingView(), a.mainH)
	}
	conv := m.conv.View()
	if a.panels == "" {
		return conv
	}
	if a.side {
		return joinSide(conv, a.panels, a.convW)
	}
	return conv + "\n" + a.panels
}

// place centres a box in the main area, clipped to it.
func (m *Model) place(box string, height int) string {
	return lipgloss.Place(m.width, height, lipgloss.Center, lipgloss.Center, clipLines(box, height))
}

func (m *Model) loadingView() string {
	st := m.styles
	w := min(m.width-4, 60)
	name := m.opts.ModelPath
	if name == "" {
		name = "the model"
	}
	stage := m.status.load.Stage
	if stage == "" {
		stage = "starting"
	}
	lines := []string{
		st.Title.Render("Loading ") + truncate(name, w-8),
		st.Dim.Render(stage),
		progressBar(st, w, m.status.load.Done, m.status.load.Total),
	}
	return strings.Join(lines, "\n")
}

// sgrReset ends every style.
const sgrReset = "\x1b[0m"

// joinSide puts right beside left (padded to width), line by line, resetting styles between
// them: a style left open at the end of a conversation line must not colour
// the panel (terminals carry SGR state along a line).
func joinSide(left, right string, width int) string {
	l := strings.Split(left, "\n")
	r := strings.Split(right, "\n")
	var b strings.Builder
	for i := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		line := l[i]
		b.WriteString(line)
		b.WriteString(strings.Repeat(" ", max(width-lipgloss.Width(line), 0)))
		b.WriteString(sgrReset + " ")
		if i < len(r) {
			b.WriteString(r[i])
		}
	}
	return b.String()
}
