package session

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
)

// A session's settings are kept with it, replaced whole, gone with it,
// and bounded; a session without any reads as empty.
func TestSessionSettings(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	info, err := s.Create(ctx, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Settings(ctx, info.ID); err != nil || len(got) != 0 {
		t.Fatalf("fresh session: %v, %v; want none", got, err)
	}
	want := Settings{"temperature": "0.2", "max_tokens": "100"}
	if err := s.SetSettings(ctx, info.ID, want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Settings(ctx, info.ID); err != nil || !maps.Equal(got, want) {
		t.Fatalf("read back %v, %v; want %v", got, err, want)
	}
	if err := s.SetSettings(ctx, info.ID, Settings{"seed": "7"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Settings(ctx, info.ID); !maps.Equal(got, Settings{"seed": "7"}) {
		t.Fatalf("replaced by %v", got)
	}
	if err := s.SetSettings(ctx, info.ID+100, want); !errors.Is(err, ErrNotFound) {
		t.Errorf("settings of a missing session: %v, want ErrNotFound", err)
	}
	if err := s.SetSettings(ctx, info.ID, Settings{"system": strings.Repeat("x", maxSettingsBytes)}); !errors.Is(err, ErrSettingsTooLarge) {
		t.Errorf("huge settings: %v, want ErrSettingsTooLarge", err)
	}
	if err := s.Delete(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM session_settings`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d settings rows left after deleting the session (%v)", n, err)
	}
	if _, err := s.db.Exec(`INSERT INTO sessions(id, created_at, updated_at) VALUES (99, 0, 0);
		INSERT INTO session_settings VALUES (99, '[1,2')`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settings(ctx, 99); err == nil {
		t.Error("damaged settings read without an error")
	}
}
