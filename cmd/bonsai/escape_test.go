package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/session"
)

// evil is stored text that would drive a terminal: an OSC title change, a
// screen clear, a NUL, a C1 CSI and DEL.
const evil = "maple\x1b]0;pwned\x07 \x1b[2J\x00\u009b31m\x7f"

// Stored titles and messages reach a terminal with their control characters
// made visible; files and pipes get the text exactly.
func TestStoredTextIsSanitisedForTheTerminal(t *testing.T) {
	isolatedXDG(t)
	path, err := session.DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, _ := s.Create(ctx, session.Meta{})
	s.Add(ctx, in.ID, session.Message{Role: chat.RoleUser, Content: evil})
	s.Add(ctx, in.ID, session.Message{Role: chat.RoleAssistant, Content: "reply " + evil})
	s.Close()

	raw := func(out string) bool { return strings.ContainsAny(out, "\x1b\x00\x07\x7f\u009b") }
	saved := isTerminalWriter
	defer func() { isTerminalWriter = saved }()
	isTerminalWriter = func(io.Writer) bool { return true }
	for _, args := range [][]string{{"sessions"}, {"sessions", "--search", "maple"}, {"sessions", "--json"},
		{"export", "last"}, {"export", "last", "--format", "json"}} {
		out, errOut, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		if raw(out) {
			t.Errorf("%v wrote control characters to the terminal: %q", args, out)
		}
		shown := "␛" // JSON spells ESC itself
		if strings.Contains(strings.Join(args, " "), "json") {
			shown = `\u001b`
		}
		if !strings.Contains(out, "maple") || !strings.Contains(out, shown) {
			t.Errorf("%v: %q, want the text with ESC shown as %s", args, out, shown)
		}
	}

	// Not a terminal: the exact text.
	isTerminalWriter = func(io.Writer) bool { return false }
	if out, _, _ := run(t, "export", "last"); !strings.Contains(out, evil) {
		t.Errorf("export to a pipe changed the text: %q", out)
	}
	file := filepath.Join(t.TempDir(), "chat.md")
	if _, errOut, code := run(t, "export", "last", "-o", file); code != 0 {
		t.Fatal(errOut)
	}
	if data, _ := os.ReadFile(file); !strings.Contains(string(data), evil) {
		t.Errorf("export to a file changed the text: %q", data)
	}
}
