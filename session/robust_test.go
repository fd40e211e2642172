package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// dirSnapshot records every file in dir with its contents.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()] = "(directory)"
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}

func foreignSQLite(t *testing.T, path string) {
	db := rawDB(t, path)
	defer db.Close()
	for _, q := range []string{
		"PRAGMA journal_mode = WAL",
		"CREATE TABLE notes(body TEXT)",
		"INSERT INTO notes VALUES ('not yours')",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRefusesOtherFilesUntouched(t *testing.T) {
	random := make([]byte, 8192)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, path string)
		want  error
	}{
		{"text file", func(t *testing.T, p string) { os.WriteFile(p, []byte("model = \"x\"\n"), 0o644) }, ErrNotDatabase},
		{"random bytes", func(t *testing.T, p string) { os.WriteFile(p, random, 0o644) }, ErrNotDatabase},
		{"truncated header", func(t *testing.T, p string) { os.WriteFile(p, []byte(sqliteMagic+"\x10\x00"), 0o644) }, ErrNotDatabase},
		{"directory", func(t *testing.T, p string) { os.Mkdir(p, 0o755) }, ErrNotDatabase},
		{"other program's SQLite", foreignSQLite, ErrForeignDatabase},
		{"empty SQLite database", func(t *testing.T, p string) {
			db := rawDB(t, p)
			db.Exec("PRAGMA user_version = 3")
			db.Close()
		}, ErrForeignDatabase},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "bonsai.db")
			tc.write(t, path)
			before := dirSnapshot(t, dir)
			s, err := Open(path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			after := dirSnapshot(t, dir)
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("directory changed:\nbefore %q\nafter  %q", keys(before), keys(after))
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s (%d bytes)", k, len(v)))
	}
	return out
}

func TestOpenEmptyFileCreatesDatabase(t *testing.T) {
	// An empty file is what a crash leaves between creating the file and
	// SQLite's first write: start afresh.
	path := filepath.Join(t.TempDir(), "bonsai.db")
	os.WriteFile(path, nil, 0o644)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestCorruptDatabaseIsReported(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bonsai.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := s.Create(context.Background(), Meta{})
	mustAdd(t, s, in.ID, chat.RoleUser, strings.Repeat("lots of text ", 2000))
	s.Close()

	// Keep page 1 (header and schema root) and overwrite every later page.
	data, _ := os.ReadFile(path)
	pageSize := int(data[16])<<8 | int(data[17])
	for i := pageSize; i < len(data); i++ {
		data[i] = 0xA5
	}
	os.WriteFile(path, data, 0o644)
	before := dirSnapshot(t, dir)

	s, err = Open(path)
	if err == nil {
		_, err = s.Load(context.Background(), in.ID)
		s.Close()
	}
	if !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("err = %v, want ErrNotDatabase", err)
	}
	if after := dirSnapshot(t, dir); after["bonsai.db"] != before["bonsai.db"] {
		t.Fatal("corrupt database was modified")
	}
}

func TestLockedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bonsai.db")
	s, err := OpenWith(path, Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})

	// Another connection (as another process would) holds the write lock.
	other := rawDB(t, path)
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	// Past the busy timeout: a clear error.
	start := time.Now()
	_, err = s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: "blocked"})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("gave up after %v, before the busy timeout", waited)
	}

	// Within the busy timeout: the writer waits and succeeds.
	patient, err := OpenWith(path, Options{BusyTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	go func() {
		time.Sleep(300 * time.Millisecond)
		conn.ExecContext(ctx, "COMMIT")
		conn.Close()
	}()
	if _, err := patient.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: "waited"}); err != nil {
		t.Fatalf("waiting writer: %v", err)
	}
	sess, _ := s.Load(ctx, in.ID)
	if len(sess.Turns) != 1 || sess.Turns[0].Content != "waited" {
		t.Fatalf("turns = %+v", sess.Turns)
	}
}

// A full disk and a database at its page limit are the same SQLite error
// (SQLITE_FULL); the page limit lets a test reach it without filling a disk.
func TestDiskFull(t *testing.T) {
	s := openTest(t, Options{FlushInterval: time.Hour})
	s.db.SetMaxOpenConns(1) // max_page_count is per connection
	ctx := context.Background()
	in, _ := s.Create(ctx, Meta{})
	mustAdd(t, s, in.ID, chat.RoleUser, "before the disk filled")
	var pages int
	if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20)
	_, err := s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: big})
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Add: err = %v, want ErrDiskFull", err)
	}

	w, err := s.BeginReply(ctx, in.ID, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(big, "")
	if err := w.Flush(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Flush: err = %v, want ErrDiskFull", err)
	}
	if !errors.Is(w.Err(), ErrDiskFull) {
		t.Errorf("Err() = %v, want ErrDiskFull", w.Err())
	}
	if err := w.Finish(Stats{}, false); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Finish: err = %v, want ErrDiskFull", err)
	}
	// What was stored before is intact.
	sess, err := s.Load(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Turns[0].Content != "before the disk filled" || len(sess.Turns) != 2 || sess.Turns[1].Content != "" {
		t.Fatalf("after disk full: %+v", sess.Turns)
	}
}
