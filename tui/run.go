package tui

import (
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
)

// Run shows the chat full-screen until the user quits, then saves what is
// pending. bubbletea restores the terminal after a panic in the UI (it
// recovers panics in Update, View and commands); Run turns that into an
// error instead of exiting.
func Run(opts Options, extra ...tea.ProgramOption) (err error) {
	m := New(opts)
	defer m.Close()
	progOpts := append([]tea.ProgramOption{tea.WithAltScreen()}, extra...)
	p := tea.NewProgram(m, progOpts...)
	if _, err := p.Run(); err != nil {
		if errors.Is(err, tea.ErrProgramPanic) {
			return fmt.Errorf("the chat crashed (the terminal was restored; please report this): %w", err)
		}
		if errors.Is(err, tea.ErrProgramKilled) {
			return nil
		}
		return fmt.Errorf("chat: %w", err)
	}
	return nil
}
