package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adrg/xdg"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/session/sessiontest"
)

// isolatedXDG points every XDG directory at a fresh temporary one.
func isolatedXDG(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, v := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
		t.Setenv(v, filepath.Join(dir, strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(v, "XDG_"), "_HOME"))))
	}
	t.Setenv("BONSAI_CONFIG_DIR", "")
	xdg.Reload()
	t.Cleanup(xdg.Reload)
	return dir
}

// seedSessions stores two conversations in the default database.
func seedSessions(t *testing.T) (first, second int64) {
	t.Helper()
	path, err := session.DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	a, _ := s.Create(ctx, session.Meta{Model: "a.gguf"})
	s.Add(ctx, a.ID, session.Message{Role: chat.RoleUser, Content: "Tell me about maples"})
	s.Add(ctx, a.ID, session.Message{Role: chat.RoleAssistant, Content: "Maples have vivid autumn colour."})
	b, _ := s.Create(ctx, session.Meta{Model: "b.gguf"})
	s.Add(ctx, b.ID, session.Message{Role: chat.RoleUser, Content: "Pines next"})
	return a.ID, b.ID
}

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runMain(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestSessionsCommand(t *testing.T) {
	isolatedXDG(t)
	out, _, code := run(t, "sessions")
	if code != 0 || !strings.Contains(out, "no saved conversations") {
		t.Fatalf("empty: code %d, %q", code, out)
	}
	if p, _ := session.DefaultPath(); fileExists(p) {
		t.Fatal("listing created a database")
	}

	first, second := seedSessions(t)
	out, errOut, code := run(t, "sessions")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "2 ") || !strings.Contains(lines[1], "Pines next") ||
		!strings.Contains(lines[2], "Tell me about maples") {
		t.Fatalf("listing:\n%s", out)
	}

	out, _, _ = run(t, "sessions", "--json")
	var list []struct {
		ID       int64  `json:"id"`
		Title    string `json:"title"`
		Messages int    `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if len(list) != 2 || list[0].ID != second || list[1].ID != first || list[1].Messages != 2 {
		t.Fatalf("--json: %+v", list)
	}

	out, _, _ = run(t, "sessions", "--search", "autumn")
	if !strings.Contains(out, "vivid autumn colour") || strings.Contains(out, "**") || !strings.Contains(out, "Tell me about maples") {
		t.Fatalf("search:\n%s", out)
	}
	out, _, _ = run(t, "sessions", "--search", "oak")
	if !strings.Contains(out, `no messages match "oak"`) {
		t.Fatalf("search without hits: %q", out)
	}

	if _, errOut, code := run(t, "sessions", "rename", "1", "Maples"); code != 0 {
		t.Fatalf("rename: %s", errOut)
	}
	if _, errOut, code := run(t, "sessions", "delete", "2"); code != 0 {
		t.Fatalf("delete: %s", errOut)
	}
	out, _, _ = run(t, "sessions")
	if strings.Contains(out, "Pines") || !strings.Contains(out, "Maples") {
		t.Fatalf("after rename and delete:\n%s", out)
	}

	for _, args := range [][]string{
		{"sessions", "delete", "2"},    // gone
		{"sessions", "delete", "x"},    // not an id
		{"sessions", "rename", "1"},    // no title
		{"sessions", "frobnicate"},     // unknown action
		{"sessions", "--no-such-flag"}, // bad flag
	} {
		if _, errOut, code := run(t, args...); code == 0 || errOut == "" {
			t.Errorf("%q: code %d, stderr %q; want a failure with a message", args, code, errOut)
		}
	}
}

func TestSessionsCommandOnForeignFile(t *testing.T) {
	isolatedXDG(t)
	path, _ := session.DefaultPath()
	os.WriteFile(path, []byte("my notes, not a database"), 0o644)
	_, errOut, code := run(t, "sessions")
	if code != 1 || !strings.Contains(errOut, "not a bonsai database") || !strings.Contains(errOut, path) {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	if data, _ := os.ReadFile(path); string(data) != "my notes, not a database" {
		t.Fatal("foreign file modified")
	}
}

func TestExportCommand(t *testing.T) {
	isolatedXDG(t)
	first, _ := seedSessions(t)
	out, errOut, code := run(t, "export", "1", "--format", "md")
	if code != 0 || !strings.HasPrefix(out, "# Tell me about maples\n") || !strings.Contains(out, "## Assistant\n\nMaples have vivid autumn colour.") {
		t.Fatalf("md to stdout: code %d %s\n%s", code, errOut, out)
	}

	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "chat.json")
	if _, errOut, code := run(t, "export", "-o", jsonPath, "1"); code != 0 {
		t.Fatalf("json to file: %s", errOut)
	}
	var doc struct {
		ID       int64 `json:"id"`
		Messages []struct {
			Role, Content string
		} `json:"messages"`
	}
	data, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(data, &doc); err != nil || doc.ID != first || len(doc.Messages) != 2 {
		t.Fatalf("-o chat.json wrote %s (%v)", data, err)
	}

	out, _, code = run(t, "export", "last", "--format", "json")
	if code != 0 || !strings.Contains(out, "Pines next") {
		t.Fatalf("export last: %s", out)
	}

	for _, args := range [][]string{
		{"export"},
		{"export", "1", "2"},
		{"export", "1", "--format", "pdf"},
		{"export", "99"},
	} {
		if _, errOut, code := run(t, args...); code == 0 || errOut == "" {
			t.Errorf("%q: code %d, stderr %q; want a failure", args, code, errOut)
		}
	}
	if _, errOut, _ := run(t, "export", "99"); !strings.Contains(errOut, "no such session") {
		t.Errorf("missing session: %q", errOut)
	}
}

func TestConfigCommand(t *testing.T) {
	dir := isolatedXDG(t)
	cfgDir := filepath.Join(dir, "config", "bonsai")
	os.MkdirAll(cfgDir, 0o755)
	os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte("model = \"x.gguf\"\nthreads = 3\nbogus = 1\n"), 0o644)
	t.Setenv("BONSAI_THREADS", "5")
	out, errOut, code := run(t, "config", "--temp", "0.2")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	for _, want := range []string{
		`model = "x.gguf"`, "config.toml:1",
		"threads = 5", "# env BONSAI_THREADS",
		"sampling.temperature = 0.2", "# flag --temp",
		`backend = "auto"`, "# default",
		filepath.Join(dir, "data", "bonsai", "bonsai.db"),
		filepath.Join(dir, "state", "bonsai", "state.json"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, `config.toml:3: unknown key "bogus"`) {
		t.Errorf("stderr lacks the unknown-key warning: %q", errOut)
	}

	os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte("threads = [\n"), 0o644)
	_, errOut, code = run(t, "config")
	if code != 1 || !strings.Contains(errOut, "config.toml:") {
		t.Fatalf("broken file: code %d, %q", code, errOut)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// "sessions list" and "sessions search WORDS" work as the flags do, and
// search snippets carry no highlight markers.
func TestSessionsListAndSearchWords(t *testing.T) {
	isolatedXDG(t)
	seedSessions(t)
	plain, _, code := run(t, "sessions")
	list, stderr, code2 := run(t, "sessions", "list")
	if code != 0 || code2 != 0 || list != plain {
		t.Fatalf("sessions list (%d, %q):\n%s\nwant what sessions prints:\n%s", code2, stderr, list, plain)
	}
	out, stderr, code := run(t, "sessions", "search", "autumn", "colour")
	if code != 0 || !strings.Contains(out, "Maples have vivid autumn colour.") {
		t.Fatalf("sessions search (%d, %q):\n%s", code, stderr, out)
	}
	if strings.Contains(out, "**") {
		t.Errorf("snippet shows highlight markers:\n%s", out)
	}
}

// Reading the conversations needs no write access to the data directory:
// listing, searching and exporting work on a read-only one, through the
// default path and through --db.
func TestReadingSessionsFromAReadOnlyDataDirectory(t *testing.T) {
	isolatedXDG(t)
	seedSessions(t)
	path, _ := session.DefaultPath()
	sessiontest.ReadOnlyDir(t, filepath.Dir(path))
	for _, args := range [][]string{
		{"sessions", "list"},
		{"sessions", "list", "--db", path},
		{"sessions", "search", "autumn"},
		{"export", "1"},
		{"export", "1", "--db", path},
	} {
		out, errOut, code := run(t, args...)
		if code != 0 || !strings.Contains(out, "maples") {
			t.Errorf("%q: code %d, stderr %q, stdout:\n%s", args, code, errOut, out)
		}
	}
	if _, errOut, code := run(t, "sessions", "rename", "1", "x", "--db", path); code == 0 || errOut == "" {
		t.Errorf("rename on a read-only directory: code %d, stderr %q; want a failure", code, errOut)
	}
}

// -o with an extension that names no format is refused, not written as
// Markdown; --format still chooses for any name.
func TestExportRefusesAnUnknownExtension(t *testing.T) {
	isolatedXDG(t)
	seedSessions(t)
	txt := filepath.Join(t.TempDir(), "chat.txt")
	if _, errOut, code := run(t, "export", "1", "-o", txt); code != 2 || !strings.Contains(errOut, `".txt"`) || fileExists(txt) {
		t.Errorf("-o chat.txt: code %d, stderr %q, written %v; want a usage error naming .txt", code, errOut, fileExists(txt))
	}
	if _, errOut, code := run(t, "export", "1", "-o", txt, "--format", "md"); code != 0 || !fileExists(txt) {
		t.Errorf("-o chat.txt --format md: code %d, %s", code, errOut)
	}
}
