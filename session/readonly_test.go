package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/session/sessiontest"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Reading needs no write access: a database in a read-only directory lists
// and loads, and nothing is created beside it.
func TestOpenReadOnlyInAReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bonsai.db")
	s := openPath(t, path)
	ctx := context.Background()
	in, err := s.Create(ctx, Meta{Model: "m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, s, in.ID, chat.RoleUser, "kept for reading")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := dirNames(t, dir)
	sessiontest.ReadOnlyDir(t, dir)

	if w, err := Open(path); err == nil {
		w.Close()
		t.Fatal("Open succeeded: the directory is not read-only")
	}
	r, err := OpenReadOnly(path, Options{})
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	defer r.Close()
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].Title != "kept for reading" {
		t.Fatalf("List = %v, %v", list, err)
	}
	sess, err := r.Load(ctx, in.ID)
	if err != nil || len(sess.Turns) != 1 {
		t.Fatalf("Load = %v, %v", sess, err)
	}
	if _, err := r.Search(ctx, "reading", SearchOptions{}); err != nil {
		t.Errorf("Search: %v", err)
	}
	if after := dirNames(t, dir); !slices.Equal(before, after) {
		t.Errorf("the directory held %v, now %v", before, after)
	}
}

// A reader migrates nothing: an older schema is named, and left as it was.
func TestOpenReadOnlyRefusesAnOldSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db := rawDB(t, path)
	for _, stmt := range []string{fmt.Sprintf("PRAGMA application_id = %d", applicationID), frozenV1(t), "PRAGMA user_version = 1"} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	if s, err := OpenReadOnly(path, Options{}); !errors.Is(err, ErrNeedsUpgrade) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenReadOnly = %v; want ErrNeedsUpgrade", err)
	}
	db = rawDB(t, path)
	defer db.Close()
	var version int
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != 1 {
		t.Errorf("schema version %d, %v; want 1, untouched", version, err)
	}
}

func TestOpenReadOnlyOfAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	if _, err := OpenReadOnly(path, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenReadOnly = %v; want ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a database was created: %v", err)
	}
}
