package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adrg/xdg"
)

func TestStateRoundTripUnderXDGStateHome(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	xdg.Reload()
	defer xdg.Reload()
	path, err := StatePath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bonsai", "state.json"); path != want {
		t.Fatalf("StatePath = %s, want %s", path, want)
	}

	st, err := LoadState(path)
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if st.LastSession != 0 || len(st.History) != 0 || st.Panels == nil {
		t.Fatalf("fresh state = %+v", st)
	}
	st.Panels["stats"] = true
	st.Panels["profile"] = false
	st.LastSession = 12
	st.AddHistory("first prompt")
	st.AddHistory("second\nline")
	if err := st.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*got) != fmt.Sprint(*st) {
		t.Fatalf("reloaded %+v, saved %+v", got, st)
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600 (prompts are private)", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("files next to the state: %v", entries)
	}
}

func TestCorruptStateIsReportedAndReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	os.WriteFile(path, []byte(`{"last_session": 3, "history": [`), 0o600)
	st, err := LoadState(path)
	if !errors.Is(err, ErrBadState) {
		t.Fatalf("err = %v, want ErrBadState", err)
	}
	if st == nil || st.LastSession != 0 || st.Panels == nil {
		t.Fatalf("state on error = %+v, want a usable empty one", st)
	}
	st.LastSession = 4
	if err := st.Save(path); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadState(path); err != nil || got.LastSession != 4 {
		t.Fatalf("after save: %+v, %v", got, err)
	}
}

func TestAddHistory(t *testing.T) {
	var st State
	st.AddHistory("")
	st.AddHistory("a")
	st.AddHistory("a")
	st.AddHistory("b")
	st.AddHistory("a")
	if strings.Join(st.History, ",") != "a,b,a" {
		t.Fatalf("history = %q", st.History)
	}
	for i := range MaxHistory + 5 {
		st.AddHistory(fmt.Sprint(i))
	}
	if len(st.History) != MaxHistory || st.History[0] != "5" || st.History[MaxHistory-1] != fmt.Sprint(MaxHistory+4) {
		t.Fatalf("history has %d entries from %q to %q", len(st.History), st.History[0], st.History[len(st.History)-1])
	}
}

func TestLogUnderXDGStateHome(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	xdg.Reload()
	defer xdg.Reload()
	path, err := LogPath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bonsai", "bonsai.log"); path != want {
		t.Fatalf("LogPath = %s, want %s", path, want)
	}
	for _, msg := range []string{"first run", "second run"} {
		log, closer, err := OpenLog(path, slog.LevelInfo)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("hidden below the level")
		log.Info(msg, "backend", "cpu")
		closer.Close()
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	if !strings.Contains(text, "msg=\"first run\" backend=cpu") || !strings.Contains(text, "msg=\"second run\"") || strings.Contains(text, "hidden") {
		t.Fatalf("log contents:\n%s", text)
	}
}
