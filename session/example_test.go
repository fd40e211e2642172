package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/session"
)

// How a chat front end uses the store: resume or start a session, save the
// prompt, stream the reply into a ReplyWriter, finish it with the engine's
// stats. (A real caller opens session.DefaultPath().)
func Example() {
	dir, _ := os.MkdirTemp("", "bonsai-example")
	defer os.RemoveAll(dir)
	store, err := session.Open(filepath.Join(dir, "bonsai.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	ctx := context.Background()

	sess, err := store.Last(ctx) // -c / --continue
	if err != nil {              // errors.Is(err, session.ErrNotFound): nothing to continue
		info, _ := store.Create(ctx, session.Meta{Model: "Bonsai-1.7B.gguf", Backend: "cpu"})
		sess = &session.Session{Info: info}
	}
	store.Add(ctx, sess.ID, session.Message{Role: chat.RoleUser, Content: "Name a bonsai tree."})

	reply, _ := store.BeginReply(ctx, sess.ID, session.Meta{Model: "Bonsai-1.7B.gguf", Backend: "cpu"})
	for _, tok := range []string{"Juniper", "."} { // per engine.Token
		reply.Append(tok, "")
	}
	reply.Finish(session.Stats{GenTokens: 2}, false) // from the engine's Done: its Stats, and Reason == "stopped"

	loaded, _ := store.Load(ctx, sess.ID)
	fmt.Println(loaded.Title)
	for _, m := range loaded.Messages() { // the engine's GenerateRequest.Messages
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	// Output:
	// Name a bonsai tree.
	// user: Name a bonsai tree.
	// assistant: Juniper.
}
