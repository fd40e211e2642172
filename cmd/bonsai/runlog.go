package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
)

// errNothingToContinue: `bonsai run -c` with no saved conversation.
var errNothingToContinue = errors.New("no saved conversation to continue yet: run without -c first")

// runLog keeps `bonsai run`'s exchanges as sessions, which `bonsai
// sessions` lists and searches and `bonsai run -c` continues, as the chat's
// conversations are kept.
type runLog struct {
	store *session.Store
	save  bool
	last  *session.Session // the conversation -c continues; nil: a new one
}

// openRunLog opens the conversation database: to continue its last session
// (cont), to keep this run (save), or both. Neither needs no database, and
// gives nil. A database that cannot be written only stops the saving, with
// a warning: a run still continues from one it can read.
func openRunLog(dbPath string, cont, save bool, stderr io.Writer) (*runLog, error) {
	if !cont && !save {
		return nil, nil
	}
	var store *session.Store
	var err error
	if save {
		if store, err = openForWriting(dbPath); err != nil {
			fmt.Fprintf(stderr, "bonsai: this run will not be saved (--no-save keeps this quiet): %v\n", err)
			save = false
		}
	}
	if !cont {
		if !save {
			return nil, nil
		}
		return &runLog{store: store, save: true}, nil
	}
	if store == nil {
		store, err = readSessions(dbPath)
		if errors.Is(err, os.ErrNotExist) {
			return nil, errNothingToContinue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot continue the last conversation: %w", err)
		}
	}
	last, err := store.Last(context.Background())
	if errors.Is(err, session.ErrNotFound) {
		err = errNothingToContinue
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	return &runLog{store: store, save: save, last: last}, nil
}

// openForWriting opens (creating if needed) the --db file, else the XDG
// default.
func openForWriting(dbPath string) (*session.Store, error) {
	path, err := sessionDBPath(dbPath)
	if err != nil {
		return nil, err
	}
	return session.Open(path)
}

// history is the conversation the prompt continues (none for a new one).
func (l *runLog) history() []chat.Message {
	if l == nil || l.last == nil {
		return nil
	}
	return l.last.Messages()
}

// keep stores the exchange: the system prompt (a new conversation's
// only), the prompt and the reply with its numbers.
func (l *runLog) keep(system, prompt string, r *runReply) error {
	if l == nil || !l.save {
		return nil
	}
	ctx := context.Background()
	meta := session.Meta{Model: r.info.Path, Variant: r.info.Variant, Backend: r.info.Backend}
	var id int64
	var turns []session.Message
	if l.last != nil {
		id = l.last.ID
	} else {
		in, err := l.store.Create(ctx, meta)
		if err != nil {
			return err
		}
		id = in.ID
		if system != "" {
			turns = append(turns, session.Message{Role: chat.RoleSystem, Content: system})
		}
	}
	st := r.done.Stats
	turns = append(turns,
		session.Message{Role: chat.RoleUser, Content: prompt, Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend},
		session.Message{Role: chat.RoleAssistant, Content: r.content.String(), Thinking: r.thinking.String(),
			Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend, Stopped: r.done.Reason == "stopped",
			Stats: session.Stats{PromptTokens: st.PrefillTokens, GenTokens: st.DecodeTokens,
				PrefillTPS: st.PrefillTPS, DecodeTPS: st.DecodeTPS, TTFT: st.TTFT}})
	for _, m := range turns {
		if _, err := l.store.Add(ctx, id, m); err != nil {
			return err
		}
	}
	return nil
}

func (l *runLog) Close() {
	if l != nil {
		l.store.Close()
	}
}

// runReply is what a run produced, for its log.
type runReply struct {
	info              engine.ModelInfo
	content, thinking strings.Builder
	done              engine.Done
}
