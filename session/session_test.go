package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adrg/xdg"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// fakeClock advances one second per reading, so ordering by time is
// deterministic.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time {
	c.t = c.t.Add(time.Second)
	return c.t
}

func openTest(t *testing.T, opts Options) *Store {
	t.Helper()
	if opts.Now == nil {
		clock := &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
		opts.Now = clock.Now
	}
	s, err := OpenWith(filepath.Join(t.TempDir(), "bonsai.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openPath(t *testing.T, path string) *Store {
	t.Helper()
	s, err := OpenWith(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustAdd(t *testing.T, s *Store, id int64, role, content string) int64 {
	t.Helper()
	mid, err := s.Add(context.Background(), id, Message{Role: role, Content: content})
	if err != nil {
		t.Fatal(err)
	}
	return mid
}

func TestDefaultPathHonoursXDGDataHome(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", dir)
	xdg.Reload()
	defer xdg.Reload()
	p, err := DefaultPath()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bonsai", "bonsai.db"); p != want {
		t.Fatalf("DefaultPath = %s, want %s", p, want)
	}
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("database not created under XDG_DATA_HOME: %v", err)
	}
}

func TestOpenSetsPragmas(t *testing.T) {
	s := openTest(t, Options{BusyTimeout: 1234 * time.Millisecond})
	ctx := context.Background()
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "1234"},
		{"user_version", "3"},
		{"application_id", "1114534729"},
	} {
		var got string
		if err := s.db.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bonsai.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := s.Create(context.Background(), Meta{Model: "m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, in.ID, chat.RoleUser, "hello there")
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	got, err := s.Load(context.Background(), in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Turns) != 1 || got.Turns[0].Content != "hello there" || got.Model != "m.gguf" {
		t.Fatalf("after reopen: %+v", got)
	}
}

func TestSessionLifecycle(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()

	a, err := s.Create(ctx, Meta{Model: "a.gguf", Variant: "Bonsai-1.7B", Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Create(ctx, Meta{Model: "b.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, a.ID, chat.RoleSystem, "be brief")
	mustAdd(t, s, a.ID, chat.RoleUser, "  What is\n a  bonsai?  ")
	mustAdd(t, s, a.ID, chat.RoleUser, "second prompt does not retitle")
	mustAdd(t, s, b.ID, chat.RoleUser, "newer session")

	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != b.ID || list[1].ID != a.ID {
		t.Fatalf("List order = %+v, want b then a", list)
	}
	if list[1].Title != "What is a bonsai?" || list[1].Messages != 3 {
		t.Errorf("session a = %+v, want title from first user prompt and 3 messages", list[1])
	}
	if !list[0].Updated.After(list[1].Updated) {
		t.Errorf("updated times not ordered: %v, %v", list[0].Updated, list[1].Updated)
	}

	// Writing to a bumps it to the top.
	mustAdd(t, s, a.ID, chat.RoleUser, "bump")
	last, err := s.Last(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last.ID != a.ID || len(last.Turns) != 4 {
		t.Fatalf("Last = session %d with %d turns, want %d with 4", last.ID, len(last.Turns), a.ID)
	}
	want := []chat.Message{
		{Role: chat.RoleSystem, Content: "be brief"},
		{Role: chat.RoleUser, Content: "  What is\n a  bonsai?  "},
		{Role: chat.RoleUser, Content: "second prompt does not retitle"},
		{Role: chat.RoleUser, Content: "bump"},
	}
	got := last.Messages()
	if len(got) != len(want) {
		t.Fatalf("Messages() = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	if err := s.Rename(ctx, a.ID, "  Trees  "); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Info(ctx, a.ID); in.Title != "Trees" {
		t.Errorf("after rename title = %q", in.Title)
	}

	if err := s.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	var orphans int
	if err := s.db.QueryRow("SELECT count(*) FROM messages WHERE session_id = ?", a.ID).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d messages survived their session's deletion", orphans)
	}
	for name, err := range map[string]error{
		"load deleted":   func() error { _, err := s.Load(ctx, a.ID); return err }(),
		"rename deleted": s.Rename(ctx, a.ID, "x"),
		"delete deleted": s.Delete(ctx, a.ID),
		"add to deleted": func() error { _, err := s.Add(ctx, a.ID, Message{Role: chat.RoleUser}); return err }(),
		"reply deleted":  func() error { _, err := s.BeginReply(ctx, a.ID, Meta{}); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
}

func TestLastOnEmptyStore(t *testing.T) {
	s := openTest(t, Options{})
	if _, err := s.Last(context.Background()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func TestAddRejectsUnknownRole(t *testing.T) {
	s := openTest(t, Options{})
	in, _ := s.Create(context.Background(), Meta{})
	if _, err := s.Add(context.Background(), in.ID, Message{Role: "tool"}); err == nil {
		t.Fatal("expected an error for role \"tool\"")
	}
}

func TestMakeTitle(t *testing.T) {
	long := strings.Repeat("word ", 40)
	for _, tc := range []struct{ in, want string }{
		{"  hello\n\tworld  ", "hello world"},
		{"", ""},
		{"日本語のタイトル", "日本語のタイトル"},
		{long, strings.TrimSpace(long[:79]) + "…"},
		{strings.Repeat("é", 100), strings.Repeat("é", 79) + "…"},
	} {
		if got := MakeTitle(tc.in); got != tc.want {
			t.Errorf("MakeTitle(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestReplyWriterStreamsAndFinishes(t *testing.T) {
	s := openTest(t, Options{FlushInterval: 50 * time.Millisecond})
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	mustAdd(t, s, in.ID, chat.RoleUser, "count")
	w, err := s.BeginReply(ctx, in.ID, Meta{Model: "m.gguf", Variant: "Bonsai-8B", Backend: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	w.Append("", "let me think")
	w.Append("one ", "")
	w.Append("two", "")

	// Before Finish, a flush makes the partial reply visible (and marked
	// interrupted, since it is not complete).
	deadline := time.Now().Add(5 * time.Second)
	var partial Message
	for time.Now().Before(deadline) {
		sess, err := s.Load(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		partial = sess.Turns[1]
		if partial.Content == "one two" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if partial.Content != "one two" || partial.Thinking != "let me think" || !partial.Interrupted {
		t.Fatalf("partial reply = %+v", partial)
	}

	stats := Stats{PromptTokens: 12, GenTokens: 3, PrefillTPS: 250.5, DecodeTPS: 42.25, TTFT: 48 * time.Millisecond}
	w.Append(" three", "")
	if err := w.Finish(stats, true); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(stats, true); !errors.Is(err, ErrClosed) {
		t.Errorf("second Finish: err = %v, want ErrClosed", err)
	}
	w.Append("ignored after finish", "")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	sess, err := s.Load(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := sess.Turns[1]
	want := Message{
		ID: got.ID, Role: chat.RoleAssistant, Content: "one two three", Thinking: "let me think",
		Stopped: true, Model: "m.gguf", Variant: "Bonsai-8B", Backend: "gpu", Stats: stats, Created: got.Created,
	}
	if got != want {
		t.Fatalf("finished reply =\n%+v\nwant\n%+v", got, want)
	}
	if got.ID != w.ID() {
		t.Errorf("message id %d, writer says %d", got.ID, w.ID())
	}
}

func TestReplyWriterWritesAtMostOncePerInterval(t *testing.T) {
	const interval = 100 * time.Millisecond
	s := openTest(t, Options{FlushInterval: interval})
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	w, err := s.BeginReply(ctx, in.ID, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n := 0
	for time.Since(start) < 5*interval {
		w.Append("x", "")
		n++
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	if err := w.Finish(Stats{}, false); err != nil {
		t.Fatal(err)
	}
	writes := int(w.writes.Load())
	maxWrites := int(elapsed/interval) + 2 // the ticks, plus Finish's
	if writes > maxWrites || writes < 2 {
		t.Fatalf("%d tokens over %v gave %d writes, want 2..%d", n, elapsed, writes, maxWrites)
	}
	sess, _ := s.Load(ctx, in.ID)
	if got := sess.Turns[0].Content; got != strings.Repeat("x", n) {
		t.Fatalf("content has %d x's, want %d", len(got), n)
	}
}

func TestSessionMessagesSkipsEmptyInterruptedReply(t *testing.T) {
	sess := &Session{Turns: []Message{
		{Role: chat.RoleUser, Content: "hi"},
		{Role: chat.RoleAssistant, Interrupted: true},
		{Role: chat.RoleUser, Content: "again"},
		{Role: chat.RoleAssistant, Content: "partial", Interrupted: true},
	}}
	got := sess.Messages()
	want := []chat.Message{
		{Role: chat.RoleUser, Content: "hi"},
		{Role: chat.RoleUser, Content: "again"},
		{Role: chat.RoleAssistant, Content: "partial"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCloseFlushesStreamingReply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bonsai.db")
	s, err := OpenWith(path, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	w, err := s.BeginReply(ctx, in.ID, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append("half a thought", "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(Stats{}, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Finish after Close: %v, want ErrClosed", err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sess, _ := s.Load(ctx, in.ID)
	if got := sess.Turns[0]; got.Content != "half a thought" || !got.Interrupted {
		t.Fatalf("after Close: %+v", got)
	}
}

func TestDeleteMessages(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	a, _ := s.Create(ctx, Meta{})
	b, _ := s.Create(ctx, Meta{})
	keep := mustAdd(t, s, a.ID, chat.RoleUser, "keep me")
	cut := mustAdd(t, s, a.ID, chat.RoleAssistant, "regenerate me")
	other := mustAdd(t, s, b.ID, chat.RoleUser, "another session, later id")
	drop := mustAdd(t, s, a.ID, chat.RoleUser, "drop me too")
	if other < cut {
		t.Fatal("test needs the other session's message after the cut")
	}

	if err := s.DeleteMessages(ctx, a.ID, []int64{keep}, []int64{cut, drop}); err != nil {
		t.Fatal(err)
	}
	sa, _ := s.Load(ctx, a.ID)
	if len(sa.Turns) != 1 || sa.Turns[0].Content != "keep me" {
		t.Fatalf("session a after cut: %+v", sa.Turns)
	}
	if sb, _ := s.Load(ctx, b.ID); len(sb.Turns) != 1 {
		t.Fatalf("session b lost messages: %+v", sb.Turns)
	}
	if hits, _ := s.Search(ctx, "regenerate", SearchOptions{}); len(hits) != 0 {
		t.Errorf("deleted message still searchable: %+v", hits)
	}
	if err := s.DeleteMessages(ctx, 999, nil, []int64{1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	// Deleting again: the messages are gone already, someone else did it.
	if err := s.DeleteMessages(ctx, a.ID, []int64{keep}, []int64{cut}); !errors.Is(err, ErrChanged) {
		t.Errorf("deleting a message already gone: %v, want ErrChanged", err)
	}
}

// Two processes on one session: B regenerates its last reply while A has
// added a turn of its own after it. Only B's reply goes, A's turn stays, and
// B hears that the session changed underneath it.
func TestDeleteMessagesKeepsAnotherProcesssTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	s := openPath(t, path)
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	u := mustAdd(t, s, in.ID, chat.RoleUser, "question")
	r := mustAdd(t, s, in.ID, chat.RoleAssistant, "B's reply, to be regenerated")

	// The other process: a second bonsai -c on the same session.
	cmd := helperCommand(t, "adder")
	cmd.Env = append(cmd.Env, writerDB+"="+path, adderSession+"="+strconv.FormatInt(in.ID, 10))
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("adder: %v %s", err, out)
	}

	err := s.DeleteMessages(ctx, in.ID, []int64{u}, []int64{r})
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "2 messages written by another process") {
		t.Errorf("regenerate under a changed session: %v, want ErrChanged naming A's 2 messages", err)
	}
	sess, _ := s.Load(ctx, in.ID)
	var got []string
	for _, m := range sess.Turns {
		got = append(got, m.Content)
	}
	want := []string{"question", "A's question", "A's reply"}
	if !slices.Equal(got, want) {
		t.Errorf("session after B's regenerate = %q, want %q", got, want)
	}
}
