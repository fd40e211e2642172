package tui

import (
	"io"
	"os"

	"github.com/aymanbagabas/go-osc52/v2"
	tea "github.com/charmbracelet/bubbletea"
)

// osc52Copy puts s on the clipboard of the terminal bonsai runs in, even
// over ssh, with an OSC 52 escape sequence (wrapped for tmux and screen).
func osc52Copy(s string) error { return writeOSC52(os.Stdout, s) }

func writeOSC52(w io.Writer, s string) error {
	seq := osc52.New(s)
	switch {
	case os.Getenv("TMUX") != "":
		seq = seq.Tmux()
	case len(os.Getenv("STY")) > 0:
		seq = seq.Screen()
	}
	_, err := seq.WriteTo(w)
	return err
}

// copiedMsg reports a clipboard copy.
type copiedMsg struct {
	what string
	err  error
}

func copyCmd(clip func(string) error, text, what string) tea.Cmd {
	return func() tea.Msg { return copiedMsg{what: what, err: clip(text)} }
}
