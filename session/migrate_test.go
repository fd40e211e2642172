package session

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// frozenV1 is the first schema as released, comments stripped.
func frozenV1(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("testdata/schema_v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// Released migrations must never change: databases in the wild were built
// by them.
func TestFirstMigrationIsFrozen(t *testing.T) {
	if strings.TrimSpace(migrations[0]) != frozenV1(t) {
		t.Fatal("migrations[0] differs from testdata/schema_v1.sql: add a new migration instead of editing a released one")
	}
}

// rawDB opens a database with no bonsai logic in between.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

func TestMigrateFromFirstSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db := rawDB(t, path)
	stmts := []string{
		fmt.Sprintf("PRAGMA application_id = %d", applicationID),
		frozenV1(t),
		`INSERT INTO sessions(id, title, created_at, updated_at) VALUES (7, 'Old chat', 1000, 2000)`,
		`INSERT INTO messages(session_id, role, content, created_at) VALUES (7, 'user', 'tell me about junipers', 1000)`,
		`INSERT INTO messages(session_id, role, content, thinking, gen_tokens, decode_tps, created_at)
			VALUES (7, 'assistant', 'Junipers tolerate hard pruning of green growth.', 'recall horticulture', 9, 31.5, 2000)`,
		"PRAGMA user_version = 1",
		"PRAGMA journal_mode = WAL",
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatalf("open v1 database: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	var version int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != SchemaVersion {
		t.Fatalf("user_version = %d after migration, want %d", version, SchemaVersion)
	}
	sess, err := s.Load(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Title != "Old chat" || len(sess.Turns) != 2 || sess.Turns[1].Stats.GenTokens != 9 || sess.Turns[1].Stats.DecodeTPS != 31.5 {
		t.Fatalf("migrated session = %+v", sess)
	}
	// The search index covers messages written before it existed...
	for q, want := range map[string]int{"pruning": 1, "horticulture": 1, "JUNIPERS": 2} {
		hits, err := s.Search(ctx, q, SearchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != want || hits[0].SessionID != 7 {
			t.Errorf("Search(%q) after migration = %+v, want %d hits in session 7", q, hits, want)
		}
	}
	// ...and ones written after.
	mustAdd(t, s, 7, chat.RoleUser, "and wisteria?")
	if hits, _ := s.Search(ctx, "wisteria", SearchOptions{}); len(hits) != 1 {
		t.Errorf("new message not indexed: %+v", hits)
	}
}

func TestNewerSchemaIsRefusedUntouched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "future.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before, _ := os.ReadFile(path)
	_, err = Open(path)
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("err = %v, want ErrTooNew", err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Fatal("a newer database was modified")
	}
}
