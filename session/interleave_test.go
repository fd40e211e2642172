package session

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// Two chats on one session (two Stores on one file stand for two bonsai
// processes): each writes after the last message it saw. The second to
// write after the other learns that the session changed under it; its
// message is still kept.
func TestWritersLearnThatTheSessionChangedUnderThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, b := openPath(t, path), openPath(t, path)
	ctx := context.Background()
	in, err := a.Create(ctx, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := a.AddAfter(ctx, in.ID, 0, Message{Role: chat.RoleUser, Content: "A's question"})
	if err != nil {
		t.Fatalf("A's first message: %v", err)
	}
	// B loaded the session now, holding q; A goes on.
	w, err := a.BeginReplyAfter(ctx, in.ID, q, Meta{})
	if err != nil {
		t.Fatalf("A's reply after its own question: %v", err)
	}
	if err := w.Finish(Stats{}, false); err != nil {
		t.Fatal(err)
	}

	bq, err := b.AddAfter(ctx, in.ID, q, Message{Role: chat.RoleUser, Content: "B's question"})
	if !errors.Is(err, ErrChanged) || bq == 0 {
		t.Fatalf("B writing after A's reply it never saw: id %d, %v; want the id and ErrChanged", bq, err)
	}
	bw, err := b.BeginReplyAfter(ctx, in.ID, bq, Meta{})
	if err != nil {
		t.Fatalf("B's reply right after its own question: %v", err)
	}
	bw.Finish(Stats{}, false)

	_, err = a.AddAfter(ctx, in.ID, w.ID(), Message{Role: chat.RoleUser, Content: "A again"})
	if !errors.Is(err, ErrChanged) {
		t.Errorf("A writing after B's turn it never saw: %v; want ErrChanged", err)
	}
	if _, err := a.BeginReplyAfter(ctx, in.ID, q, Meta{}); !errors.Is(err, ErrChanged) {
		t.Errorf("a reply begun after a stale message: %v; want ErrChanged", err)
	}
	sess, err := a.Load(ctx, in.ID)
	if err != nil || len(sess.Turns) != 6 {
		t.Fatalf("every message is kept: %d turns, %v", len(sess.Turns), err)
	}
}
