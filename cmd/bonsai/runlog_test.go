package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/session/sessiontest"
)

// promptTokens runs `bonsai run` in jsonl mode and returns the prompt's
// token count from its summary line.
func promptTokens(t *testing.T, args ...string) int {
	t.Helper()
	out, errOut, code := run(t, append([]string{"run", "--backend", "cpu", "--temp", "0", "--max-tokens", "3", "--format", "jsonl"}, args...)...)
	if code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var done struct {
		PromptTokens int `json:"prompt_tokens"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil {
		t.Fatal(err)
	}
	return done.PromptTokens
}

// Runs are kept as sessions that `bonsai sessions` lists and searches, and
// -c continues the last one: its turns come before the new prompt, and the
// exchange is added to it.
func TestRunIsKeptAndContinued(t *testing.T) {
	isolatedXDG(t)
	fresh := promptTokens(t, "How do maples grow?")
	out, errOut, code := run(t, "sessions", "--json")
	var list []struct {
		Title    string `json:"title"`
		Messages int    `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 {
		t.Fatalf("sessions --json: %v, exit %d, %s", err, code, errOut)
	}
	if len(list) != 1 || list[0].Title != "How do maples grow?" || list[0].Messages != 2 {
		t.Fatalf("after one run, sessions: %+v", list)
	}

	continued := promptTokens(t, "-c", "How do maples grow?")
	if continued <= fresh {
		t.Errorf("-c prompt of %d tokens, a fresh one %d: the last conversation was not continued", continued, fresh)
	}
	out, _, _ = run(t, "sessions", "--json")
	json.Unmarshal([]byte(out), &list)
	if len(list) != 1 || list[0].Messages != 4 {
		t.Fatalf("after run -c, sessions: %+v", list)
	}
	if out, _, _ := run(t, "sessions", "search", "maples"); !strings.Contains(out, "How do maples grow?") {
		t.Errorf("sessions search does not find the run:\n%s", out)
	}
	path, _ := session.DefaultPath()
	s, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	last, _ := s.Last(t.Context())
	if r := last.Turns[len(last.Turns)-1]; r.Role != "assistant" || r.Backend != "cpu" || r.Model == "" || r.Stats.GenTokens == 0 {
		t.Errorf("the stored reply lacks its model, backend or numbers: %+v", r)
	}
}

// --no-save keeps nothing; -c with nothing to continue says so.
func TestRunNoSaveAndNothingToContinue(t *testing.T) {
	isolatedXDG(t)
	if _, errOut, code := run(t, "run", "--backend", "cpu", "-c", "hi"); code != 1 || !strings.Contains(errOut, "no saved conversation to continue") {
		t.Errorf("-c with no conversation: exit %d, %q", code, errOut)
	}
	promptTokens(t, "--no-save", "hi")
	if out, _, _ := run(t, "sessions"); !strings.Contains(out, "no saved conversations") {
		t.Errorf("--no-save kept the run:\n%s", out)
	}
}

// A run on a read-only data directory still answers, and still continues
// the last conversation, saying that it is not saved.
func TestRunOnAReadOnlyDataDirectory(t *testing.T) {
	isolatedXDG(t)
	promptTokens(t, "How do maples grow?")
	path, _ := session.DefaultPath()
	sessiontest.ReadOnlyDir(t, filepath.Dir(path))
	out, errOut, code := run(t, "run", "--backend", "cpu", "--temp", "0", "--max-tokens", "2", "-c", "And oaks?")
	if code != 0 || strings.TrimSpace(out) == "" || !strings.Contains(errOut, "will not be saved") {
		t.Errorf("run -c on a read-only data directory: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
