package tui

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
)

// Two chats on one session (a second Store on the same file stands for the
// other bonsai): the other one adds a turn after this one's reply; this one
// then sends. Both turns are kept, and this chat says that the session
// changed under it, as regenerate does.
func TestSendingAfterAnotherChatsTurnSaysSo(t *testing.T) {
	m, fe, store, other := chatBesideAnother(t)
	if _, err := other.Add(context.Background(), m.sessionID, session.Message{Role: chat.RoleUser, Content: "other's question"}); err != nil {
		t.Fatal(err)
	}

	sendAndWait(t, m, fe, "next")
	settle(m)
	sameTurns(t, "stored", storedTurns(t, store, m.sessionID), []string{
		"user:question", "assistant:Reply 1 to: question", "user:other's question",
		"user:next", "assistant:Reply 2 to: next"})
	contains(t, m.View(), "changed this chat")
}

// chatBesideAnother opens a chat on a fresh database, sends "question" and
// opens a second Store on the same file, which stands for another bonsai
// process on the chat's session.
func chatBesideAnother(t *testing.T) (m *Model, fe *fakeengine.Engine, store, other *session.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bonsai.db")
	store, err := session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m, fe, _ = newTestModel(t, Options{Store: store}, 100, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "question")
	settle(m)
	other, err = session.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return m, fe, store, other
}
