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
	twoColumns := m.width >= 2*helpColumnWidth+8
	// One column has the box's width; two have helpColumnWidth each.
	inner := width - 6
	if twoColumns {
		inner = helpColumnWidth
	}
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
	var tips []string
	for _, t := range helpTips {
		tips = append(tips, st.HelpDesc.Render(truncate(t, inner)))
	}
	cmdBlock += "\n\n" + st.PanelHead.Render("Settings") + "\n" + strings.Join(tips, "\n")
	var body string
	if twoColumns {
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

// helpTips are the settings people look for in the help.
var helpTips = []string{
	`config.toml: theme = "dark" | "light" | "auto"`,
	"  also context_size, model, backend, [sampling], [keys]",
	"bonsai --mouse: wheel scrolling (shift selects text)",
	"bonsai config: each setting and where it came from",
}

// helpColumnWidth is roughly one column of the help (key or command list).
const helpColumnWidth = 60

// xansiStrip removes escape sequences (to restyle a whole line).
func xansiStrip(s string) string { return xansi.Strip(s) }
