package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/aymanbagabas/go-osc52/v2"
	tea "github.com/charmbracelet/bubbletea"
)

// Clipboard copies text and says how, in words the status line shows after
// "copied …" ("to the clipboard (xclip)"): the truth about where it went,
// which for an escape sequence the terminal may ignore is only that it was
// sent.
type Clipboard func(text string) (how string, err error)

// ClipboardEnv is what the copy depends on: the environment variables a
// terminal multiplexer or display server sets, and where escape sequences
// go. The chat fills it from the process; tests from fixtures.
type ClipboardEnv struct {
	Getenv   func(string) string
	Terminal io.Writer
	// LookPath finds a clipboard program (exec.LookPath); Run runs it with
	// the text on its stdin.
	LookPath func(string) (string, error)
	Run      func(path string, args []string, stdin string) error
	// Output runs a program and returns what it printed (asking tmux
	// whether it passes OSC 52 on).
	Output func(path string, args []string) (string, error)
}

// SystemClipboard copies with OSC 52 and, where one exists, the display
// server's clipboard program: OSC 52 reaches the terminal even over ssh,
// and inside tmux it is sent plain (tmux forwards it with set-clipboard on,
// and drops the passthrough-wrapped form unless allow-passthrough is on); a
// clipboard program works whatever the terminal, on the machine bonsai runs
// on.
func SystemClipboard(env ClipboardEnv) Clipboard {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.LookPath == nil {
		env.LookPath = exec.LookPath
	}
	if env.Run == nil {
		env.Run = runClipboardProgram
	}
	if env.Output == nil {
		env.Output = programOutput
	}
	return func(text string) (string, error) {
		var oscErr error
		if env.Terminal != nil {
			oscErr = writeOSC52(env.Terminal, text, env.Getenv)
		}
		var progErr error
		for _, p := range clipboardPrograms(env.Getenv) {
			path, err := env.LookPath(p.name)
			if err != nil {
				continue
			}
			if progErr = env.Run(path, p.args, text); progErr == nil {
				return "to the clipboard (" + p.name + ")", nil
			}
		}
		switch {
		case env.Terminal == nil || oscErr != nil:
			if progErr == nil {
				progErr = errors.New("no clipboard program (xclip, xsel, wl-copy, pbcopy) found")
			}
			return "", errors.Join(progErr, oscErr)
		case env.Getenv("TMUX") != "":
			return tmuxHow(env), nil
		}
		return "to the terminal (OSC 52, if it allows)", nil
	}
}

// tmuxHow says where an OSC 52 copy inside tmux went: tmux passes it to
// the terminal only with its set-clipboard option on (or external), which
// tmux is asked about rather than the user told to check.
func tmuxHow(env ClipboardEnv) string {
	if path, err := env.LookPath("tmux"); err == nil {
		if out, err := env.Output(path, []string{"show", "-gv", "set-clipboard"}); err == nil {
			switch strings.TrimSpace(out) {
			case "on", "external":
				return "through tmux to the terminal (OSC 52)"
			case "off":
				return "to tmux only (tmux set -g set-clipboard on passes it on)"
			}
		}
	}
	return "through tmux (OSC 52; needs its set-clipboard on)"
}

// programOutput runs a short query (tmux show) with a timeout.
func programOutput(path string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).Output()
	return string(out), err
}

type clipboardProgram struct {
	name string
	args []string
}

// clipboardPrograms are the programs that can hold a clipboard here, best
// first: Wayland's and X's only with a display to talk to.
func clipboardPrograms(getenv func(string) string) []clipboardProgram {
	var ps []clipboardProgram
	if runtime.GOOS == "darwin" {
		ps = append(ps, clipboardProgram{"pbcopy", nil})
	}
	if getenv("WAYLAND_DISPLAY") != "" {
		ps = append(ps, clipboardProgram{"wl-copy", nil})
	}
	if getenv("DISPLAY") != "" {
		ps = append(ps, clipboardProgram{"xclip", []string{"-selection", "clipboard"}},
			clipboardProgram{"xsel", []string{"--clipboard", "--input"}})
	}
	return ps
}

func runClipboardProgram(path string, args []string, stdin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ProcessClipboardEnv is the clipboard's environment for a chat on this
// process's terminal.
func ProcessClipboardEnv() ClipboardEnv {
	return ClipboardEnv{Getenv: os.Getenv, Terminal: os.Stdout}
}

// writeOSC52 writes the set-clipboard sequence: plain inside tmux, wrapped
// for GNU screen, which passes on nothing else.
func writeOSC52(w io.Writer, s string, getenv func(string) string) error {
	seq := osc52.New(s)
	if getenv("TMUX") == "" && getenv("STY") != "" {
		seq = seq.Screen()
	}
	_, err := seq.WriteTo(w)
	return err
}

// copiedMsg reports a clipboard copy.
type copiedMsg struct {
	what, how string
	err       error
}

func copyCmd(clip Clipboard, text, what string) tea.Cmd {
	return func() tea.Msg {
		how, err := clip(text)
		return copiedMsg{what: what, how: how, err: err}
	}
}
