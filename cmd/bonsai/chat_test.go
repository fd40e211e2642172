package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/tui"
	tea "github.com/charmbracelet/bubbletea"
)

// A file bonsai cannot run is refused before the chat takes the terminal.
func TestChatRefusesUnrunnableModels(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "passwd")
	if err := os.WriteFile(notGGUF, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownArch := filepath.Join(dir, "mamba.gguf")
	w := gguf.NewWriter()
	w.Set("general.architecture", "mamba")
	if err := w.WriteFile(unknownArch); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{notGGUF, gguf.ErrNotGGUF},
		{unknownArch, infer.ErrUnsupportedArch},
		{filepath.Join(dir, "missing.gguf"), nil},
	} {
		_, f, _, err := openChatModel(tc.path)
		if err == nil {
			f.Close()
			t.Errorf("%s: opened, want it refused", tc.path)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.path, err, tc.want)
		}
	}
	path, f, hp, err := openChatModel("")
	if err != nil {
		t.Fatalf("the embedded model: %v", err)
	}
	defer f.Close()
	if path != defaultmodel.Path || hp.ContextTrain == 0 {
		t.Errorf("embedded model: path %q, trained context %d", path, hp.ContextTrain)
	}
}

// The chat's default context is the engine's, which the model caps; a
// larger size the user asks for is kept (the engine tells the user it is
// beyond the training: TestNotesAreNoticed in infer/engine).
func TestChatContext(t *testing.T) {
	hp := infer.Hyperparams{ContextTrain: 1024}
	def, err := config.Load(config.LoadOptions{NoFile: true, Env: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if n := chatContext(def, hp); n != 0 {
		t.Errorf("default: context %d, want 0 (capped by the model)", n)
	}
	env := func(k string) (string, bool) {
		if k == "BONSAI_CTX" {
			return "8192", true
		}
		return "", false
	}
	big, err := config.Load(config.LoadOptions{NoFile: true, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if n := chatContext(big, hp); n != 8192 {
		t.Errorf("asked for 8192: context %d", n)
	}
}

// Help asked for goes to stdout, as `bonsai help` does; --version answers;
// the chat refuses a stdin that is not a terminal (/dev/null is a character
// device, not a terminal) instead of dying inside the TUI.
func TestHelpVersionAndNoTerminal(t *testing.T) {
	for _, args := range [][]string{{"pull", "-h"}, {"sessions", "--help"}, {"-h"}, {"help"}} {
		out, errOut, code := run(t, args...)
		if code != 0 || !strings.Contains(out, "usage") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if out, _, code := run(t, "--version"); code != 0 || !strings.HasPrefix(out, "bonsai ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	if isTerminal(devNull) {
		t.Error("/dev/null counts as a terminal")
	}
}

// Settings the engine cannot start with are refused before the chat takes
// the terminal, in one line with exit status 1, as `bonsai run` refuses
// them: never a chat whose every message is "not sent".
func TestChatRefusesSettingsItCannotStart(t *testing.T) {
	isolatedXDG(t)
	savedTerm, savedRun := chatTerminal, runTUI
	t.Cleanup(func() { chatTerminal, runTUI = savedTerm, savedRun })
	chatTerminal = func() bool { return true }
	opened := false
	runTUI = func(tui.Options, ...tea.ProgramOption) error {
		opened = true
		return nil
	}
	for _, args := range [][]string{
		{"--no-save", "--ctx", "99999999"},
		{"--no-save", "--backend", "gpu", "--adapter", "no such adapter"},
	} {
		opened = false
		_, errOut, code := run(t, args...)
		if code != 1 || opened || !strings.Contains(errOut, "cannot start the model") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, chat opened %v, stderr %q; want one line and exit 1 before the chat opens", args, code, opened, errOut)
		}
	}
	// Settings that start open the chat.
	opened = false
	if _, errOut, code := run(t, "--no-save", "--backend", "cpu"); code != 0 || !opened {
		t.Errorf("the default model on the CPU: exit %d, chat opened %v, stderr %q", code, opened, errOut)
	}
}
