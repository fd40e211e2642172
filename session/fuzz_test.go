package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// FuzzStoreOperations runs the store's writes and queries on arbitrary text
// and ids: content comes back byte for byte (NULs, invalid UTF-8, SQL and
// FTS syntax included), a title is what MakeTitle makes of it, and deleting
// arbitrary ids from one session never touches another's messages.
func FuzzStoreOperations(f *testing.F) {
	for _, s := range []struct {
		content, title string
		drop           int64
	}{
		{"hello", "a title", 2}, {"'; DROP TABLE messages; --", "\x00\x1b[2J", 1}, {"\xff\xfe bad utf-8", "", -1},
		{"NEAR(a b) \"x", "   spaced   out   ", 1 << 62}, {"", "\u009b31m", 0},
	} {
		f.Add(s.content, s.title, s.drop)
	}
	s, err := Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	other, _ := s.Create(ctx, Meta{})
	otherMsg, err := s.Add(ctx, other.ID, Message{Role: chat.RoleUser, Content: "the other session's"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, content, title string, drop int64) {
		in, err := s.Create(ctx, Meta{Model: title})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Delete(ctx, in.ID)
		u, err := s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: content})
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.BeginReply(ctx, in.ID, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(content, title)
		if err := w.Finish(Stats{GenTokens: 3}, false); err != nil {
			t.Fatal(err)
		}
		if err := s.Rename(ctx, in.ID, title); err != nil {
			t.Fatal(err)
		}
		sess, err := s.Load(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(sess.Turns) != 2 || sess.Turns[0].Content != content || sess.Turns[1].Content != content || sess.Turns[1].Thinking != title {
			t.Fatalf("stored %q, got back %+v", content, sess.Turns)
		}
		if sess.Title != MakeTitle(title) {
			t.Fatalf("title %q, want %q", sess.Title, MakeTitle(title))
		}
		if _, err := s.Search(ctx, content, SearchOptions{}); err != nil {
			t.Fatalf("Search(%q): %v", content, err)
		}
		err = s.DeleteMessages(ctx, in.ID, []int64{u}, []int64{drop, otherMsg})
		if err != nil && !errors.Is(err, ErrChanged) {
			t.Fatalf("DeleteMessages: %v", err)
		}
		if o, err := s.Load(ctx, other.ID); err != nil || len(o.Turns) != 1 {
			t.Fatalf("another session lost its message: %+v, %v", o, err)
		}
	})
}
