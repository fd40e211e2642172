package tui

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Run shows the chat full-screen until the user quits, then saves what is
// pending. bubbletea restores the terminal after a panic in the UI (it
// recovers panics in Update, View and commands); Run turns that into an
// error instead of exiting.
//
// SIGHUP (the terminal closed), SIGTERM and SIGINT end the chat the way
// quitting does, through the model, so that a streaming reply is stored
// whole (marked interrupted) and nothing queued is lost; bubbletea's own
// handler would quit without the model hearing of it, and it ignores
// SIGHUP, whose default action kills the process outright.
func Run(opts Options, extra ...tea.ProgramOption) (err error) {
	m := New(opts)
	defer m.Close()
	progOpts := append([]tea.ProgramOption{tea.WithAltScreen(), tea.WithoutSignalHandler()}, extra...)
	p := tea.NewProgram(m, progOpts...)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			p.Send(signalMsg{sig})
			// A program stuck writing to a terminal that has gone must
			// still end; Close then saves what the model queued.
			select {
			case <-time.After(3 * time.Second):
				p.Kill()
			case <-done:
			}
		case <-done:
		}
	}()
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
