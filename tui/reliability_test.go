package tui

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
)

// shown is the transcript's stored entries in turns' form.
func shown(m *Model) []string {
	var out []string
	for _, msg := range m.conv.Messages() {
		out = append(out, msg.Role+":"+msg.Content)
	}
	return out
}

func storedTurns(t *testing.T, store *session.Store, id int64) []string {
	t.Helper()
	sess, err := store.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range sess.Turns {
		if m.Interrupted {
			t.Errorf("message %d (%s) left interrupted", m.ID, m.Content)
		}
	}
	return turns(sess)
}

func sameTurns(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// retry runs the scheduled retry of unsaved messages at once.
func retry(m *Model) {
	m.Update(retrySaveMsg{})
	settle(m)
}

// lockDB holds the database's write lock, as another process inside a long
// transaction, until the returned function releases it.
func lockDB(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// A message sent while another process holds the database stays queued,
// visibly unsaved, and is written (in order, once) when the lock goes; the
// stored ids never drift from the screen, so regenerate afterwards replaces
// the right reply and -c shows each message once.
func TestLockedDatabaseQueuesAndRetries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bonsai.db")
	store, err := session.OpenWith(path, session.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, fe, _ := newTestModel(t, Options{Store: store}, 100, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "one")
	settle(m)

	release := lockDB(t, path)
	sendAndWait(t, m, fe, "two")
	settle(m)
	contains(t, m.View(), "unsaved")
	if !m.retryArmed {
		t.Error("no retry scheduled")
	}
	retry(m) // still locked: still unsaved
	contains(t, m.View(), "unsaved")

	release()
	retry(m)
	lacks(t, m.View(), "unsaved")
	sameTurns(t, "stored after the lock", storedTurns(t, store, m.sessionID), shown(m))

	m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	idle(t, m, fe)
	settle(m)
	sameTurns(t, "stored after regenerate", storedTurns(t, store, m.sessionID), shown(m))
	if got := shown(m); len(got) != 4 || got[3] != "assistant:Reply 3 to: two" {
		t.Errorf("transcript %q", got)
	}

	// Locked while a reply streams: its row exists, incomplete; the final
	// write fails and is retried until the row is complete, never left an
	// orphan interrupted row.
	typeText(m, "three")
	press(m, tea.KeyEnter)
	settle(m) // the prompt and the reply's row are written
	release = lockDB(t, path)
	idle(t, m, fe)
	settle(m)
	contains(t, m.View(), "unsaved")
	release()
	retry(m)
	lacks(t, m.View(), "unsaved")
	sameTurns(t, "stored after a lock mid-reply", storedTurns(t, store, m.sessionID), shown(m))
}

// The same with a full disk: a real tmpfs of 1 MiB, filled up mid-chat.
// Nothing is lost, no reply is left incomplete, and the order holds.
func TestFullDiskQueuesAndRetries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	path := filepath.Join(dir, "bonsai.db")
	store, err := session.OpenWith(path, session.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fe := fakeengine.New(fakeengine.Options{TokenDelay: time.Millisecond,
		Replies: []fakeengine.Reply{{Content: "short"}, {Content: strings.Repeat("long reply ", 200)}}})
	m, _, _ := newTestModel(t, Options{Store: store, Engine: fe}, 100, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "one")
	settle(m)

	fill := filepath.Join(dir, "filler")
	fillUp(t, fill)
	sendAndWait(t, m, fe, "two")
	settle(m)
	contains(t, m.View(), "unsaved")
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	retry(m)
	lacks(t, m.View(), "unsaved")
	sameTurns(t, "stored after the disk filled", storedTurns(t, store, m.sessionID), shown(m))
}

// fillUp writes path until the file system is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// Two bonsai processes on one session (a second Store on the same file
// stands for the other process): the other one adds a turn after this one's
// reply; this one regenerates. Only its own reply goes; the other's turn
// stays, and this one says the session changed.
func TestRegenerateKeepsAnotherProcesssTurns(t *testing.T) {
	m, fe, store, other := chatBesideAnother(t)
	ctx := context.Background()
	for _, msg := range []session.Message{{Role: chat.RoleUser, Content: "other's question"}, {Role: chat.RoleAssistant, Content: "other's reply"}} {
		if _, err := other.Add(ctx, m.sessionID, msg); err != nil {
			t.Fatal(err)
		}
	}

	m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	idle(t, m, fe)
	settle(m)
	sameTurns(t, "stored", storedTurns(t, store, m.sessionID), []string{
		"user:question", "user:other's question", "assistant:other's reply", "assistant:Reply 2 to: question"})
	contains(t, m.View(), "changed this chat")
}

// A stored title or message holding escape sequences (a model can write
// them, and so can another program) never reaches the terminal raw: not in
// the header, the session list, a search hit or the transcript.
func TestStoredEscapesNeverReachTheTerminal(t *testing.T) {
	const evil = "maple\x1b]0;pwned\x07\x1b[2J\x00\u009b31m"
	store := openStore(t)
	ctx := context.Background()
	info, err := store.Create(ctx, session.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	store.Add(ctx, info.ID, session.Message{Role: chat.RoleUser, Content: evil})
	store.Add(ctx, info.ID, session.Message{Role: chat.RoleAssistant, Content: "reply " + evil})
	sess, err := store.Load(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	m, fe, _ := newTestModel(t, Options{Store: store, Resume: sess}, 100, 30)
	loaded(t, m, fe)
	check := func(what string) {
		t.Helper()
		v := m.View()
		if strings.ContainsAny(v, "\x1b\x00\x07\u009b") {
			t.Errorf("%s: raw control characters in the view: %q", what, v)
		}
		contains(t, v, "maple␛")
	}
	check("resumed")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	run(m, cmd)
	check("session list")
	typeText(m, "pwned")
	settle(m)
	check("search")
}

// A prompt is in the state file as soon as it is sent (a process killed
// later keeps its history), and a reply the process did not live to finish
// reads "interrupted" on resume, not "stopped".
func TestHistoryAtOnceAndInterruptedOnResume(t *testing.T) {
	store := openStore(t)
	statePath := filepath.Join(t.TempDir(), "state.json")
	m, fe, _ := newTestModel(t, Options{Store: store, StatePath: statePath}, 100, 30)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "remember me")
	settle(m)
	if data, err := os.ReadFile(statePath); err != nil || !strings.Contains(string(data), "remember me") {
		t.Errorf("state file before quitting: %q, %v", data, err)
	}

	// The signal path: the reply streams, the process is told to end.
	fe2 := fakeengine.New(fakeengine.Options{TokenDelay: 2 * time.Millisecond,
		Replies: []fakeengine.Reply{{Content: strings.Repeat("verse ", 400)}}})
	m2, _, _ := newTestModel(t, Options{Store: store, Engine: fe2}, 100, 30)
	loaded(t, m2, fe2)
	typeText(m2, "go")
	press(m2, tea.KeyEnter)
	pump(t, m2, fe2, func() bool { return strings.Count(m2.conv.entries[len(m2.conv.entries)-1].content, "verse") > 20 })
	shownReply := m2.conv.entries[len(m2.conv.entries)-1].content
	tokens := m2.status.stats.DecodeTokens
	m2.Update(signalMsg{syscall.SIGHUP})
	if !m2.quit {
		t.Error("a signal did not quit")
	}
	m2.Close()
	sess, err := store.Last(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := sess.Turns[len(sess.Turns)-1]
	if !r.Interrupted || r.Stopped || r.Content != shownReply || r.Stats.GenTokens != tokens || tokens == 0 {
		t.Errorf("reply stored interrupted=%v stopped=%v, %d of %d bytes, %d tokens (shown %d)",
			r.Interrupted, r.Stopped, len(r.Content), len(shownReply), r.Stats.GenTokens, tokens)
	}
	m3, fe3, _ := newTestModel(t, Options{Store: store, Resume: sess}, 100, 30)
	loaded(t, m3, fe3)
	v := m3.View()
	contains(t, v, "■ interrupted")
	lacks(t, v, "■ stopped")
}
