package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	xansi "github.com/charmbracelet/x/ansi"
)

// helpView lists the key bindings and /commands, generated from the key map
// and the command table so it cannot drift from what they do.
func (m *Model) helpView() string {
	st := m.styles
	width := min(m.width-2, 84)
	inner := min(width-6, helpColumnWidth)
	var keys []string
	keyW := 0
	for _, b := range m.keys.helpRows() {
		keyW = max(keyW, lipgloss.Width(b.Help().Key))
	}
	for _, b := range m.keys.helpRows() {
		h := b.Help()
		keys = append(keys, st.HelpKey.Render(fmt.Sprintf("%-*s", keyW, h.Key))+"  "+st.HelpDesc.Render(truncate(h.Desc, max(inner-keyW-2, 10))))
	}
	var cmds []string
	cmdW := 0
	for _, c := range slashCommands {
		cmdW = max(cmdW, len(strings.TrimSpace("/"+c.name+" "+c.usage)))
	}
	for _, c := range slashCommands {
		name := strings.TrimSpace("/" + c.name + " " + c.usage)
		cmds = append(cmds, st.HelpKey.Render(fmt.Sprintf("%-*s", cmdW, name))+"  "+st.HelpDesc.Render(truncate(c.summary, max(inner-cmdW-2, 10))))
	}
	keyBlock := st.PanelHead.Render("Keys") + "\n" + strings.Join(keys, "\n")
	cmdBlock := st.PanelHead.Render("Commands") + "\n" + strings.Join(cmds, "\n")
	var body string
	if m.width >= 2*helpColumnWidth+8 {
		body = lipgloss.JoinHorizontal(lipgloss.Top, keyBlock, "    ", cmdBlock)
		width = lipgloss.Width(body) + 6
	} else {
		body = keyBlock + "\n\n" + cmdBlock
	}
	// Scroll when the terminal is too short for all of it.
	lines := strings.Split(body, "\n")
	room := max(m.height-fixedRows-m.input.Height()-4, 3)
	m.helpOffset = min(m.helpOffset, max(len(lines)-room, 0))
	footer := "esc closes this help"
	if len(lines) > room {
		lines = lines[m.helpOffset : m.helpOffset+room]
		footer = "↑/↓ scroll · " + footer
	}
	body = strings.Join(lines, "\n") + "\n" + st.Dim.Render(footer)
	return st.Overlay.Width(width - 2).Render(body)
}

// helpColumnWidth is roughly one column of the help (key or command list).
const helpColumnWidth = 60

// xansiStrip removes escape sequences (to restyle a whole line).
func xansiStrip(s string) string { return xansi.Strip(s) }
