package tui

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestSystemClipboard(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		programs map[string]bool // found on PATH
		failRun  bool
		tmux     string // what `tmux show -gv set-clipboard` prints
		wantSeq  string // prefix of what reaches the terminal
		wantHow  string
		wantErr  bool
	}{
		// tmux drops the passthrough-wrapped sequence by default but
		// forwards a plain one with set-clipboard on.
		{name: "tmux, no display", vars: map[string]string{"TMUX": "/tmp/tmux-0/default,1,0"},
			wantSeq: "\x1b]52;c;", wantHow: "set-clipboard on"},
		{name: "tmux, set-clipboard on", vars: map[string]string{"TMUX": "x"}, programs: map[string]bool{"tmux": true}, tmux: "on\n",
			wantSeq: "\x1b]52;c;", wantHow: "through tmux to the terminal (OSC 52)"},
		{name: "tmux, set-clipboard off", vars: map[string]string{"TMUX": "x"}, programs: map[string]bool{"tmux": true}, tmux: "off\n",
			wantSeq: "\x1b]52;c;", wantHow: "tmux set -g set-clipboard on"},
		{name: "tmux with xclip", vars: map[string]string{"TMUX": "x", "DISPLAY": ":0"}, programs: map[string]bool{"xclip": true},
			wantSeq: "\x1b]52;c;", wantHow: "to the clipboard (xclip)"},
		{name: "wayland", vars: map[string]string{"WAYLAND_DISPLAY": "wayland-0"}, programs: map[string]bool{"wl-copy": true, "xclip": true},
			wantSeq: "\x1b]52;c;", wantHow: "(wl-copy)"},
		{name: "screen", vars: map[string]string{"STY": "1.pts"}, wantSeq: "\x1bP\x1b]52;c;", wantHow: "OSC 52"},
		{name: "xclip fails, xsel works", vars: map[string]string{"DISPLAY": ":0"}, programs: map[string]bool{"xclip": true, "xsel": true},
			failRun: true, wantSeq: "\x1b]52;c;", wantHow: "(xsel)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var term bytes.Buffer
			var ran []string
			clip := SystemClipboard(ClipboardEnv{
				Getenv: env(tc.vars), Terminal: &term,
				LookPath: func(name string) (string, error) {
					if tc.programs[name] {
						return "/usr/bin/" + name, nil
					}
					return "", exec.ErrNotFound
				},
				Run: func(path string, args []string, stdin string) error {
					ran = append(ran, path)
					if stdin != "hello" {
						t.Errorf("%s got %q", path, stdin)
					}
					if tc.failRun && strings.HasSuffix(path, "xclip") {
						return errors.New("Can't open display")
					}
					return nil
				},
				Output: func(path string, args []string) (string, error) {
					if !strings.HasSuffix(path, "tmux") || strings.Join(args, " ") != "show -gv set-clipboard" {
						t.Errorf("asked %s %v", path, args)
					}
					return tc.tmux, nil
				},
			})
			how, err := clip("hello")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !strings.HasPrefix(term.String(), tc.wantSeq) {
				t.Errorf("terminal got %q, want it to start %q", term.String(), tc.wantSeq)
			}
			if !strings.Contains(how, tc.wantHow) {
				t.Errorf("how = %q, want %q in it", how, tc.wantHow)
			}
			if tc.tmux == "on\n" && strings.Contains(how, "set-clipboard") {
				t.Errorf("how = %q asks for set-clipboard, which tmux says is on", how)
			}
			if len(how) > 60 {
				t.Errorf("how = %q: too long for the status line beside \"copied the last reply\"", how)
			}
		})
	}
	// No terminal and no program: the copy fails, and says so.
	clip := SystemClipboard(ClipboardEnv{LookPath: func(string) (string, error) { return "", exec.ErrNotFound }})
	if how, err := clip("x"); err == nil {
		t.Errorf("nothing to copy to reported success: %q", how)
	}
}
