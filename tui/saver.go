package tui

import (
	"context"
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	tea "github.com/charmbracelet/bubbletea"
)

// saver keeps the conversation in the session store. Its fields belong to
// the background goroutine: the UI only queues jobs (the methods below), so
// message ids and the open ReplyWriter never cross goroutines. Stored
// messages mirror the transcript's model-visible entries one for one, which
// is how the UI names them (by position), never by database id.
type saver struct {
	store     *session.Store
	bg        *background
	sessionID int64   // 0: no session yet (created with the first message)
	ids       []int64 // stored message ids, in transcript order
	reply     *session.ReplyWriter
}

// Messages sent to the UI by saver jobs.
type (
	// savedSessionMsg: the conversation now lives in this session.
	savedSessionMsg struct{ info session.Info }
	// saveErrMsg: something could not be saved.
	saveErrMsg struct{ err error }
)

func (s *saver) enabled() bool { return s != nil && s.store != nil }

// ensureSession creates the session on first use. It runs in the
// background goroutine.
func (s *saver) ensureSession(meta session.Meta) (tea.Msg, error) {
	if s.sessionID != 0 {
		return nil, nil
	}
	info, err := s.store.Create(context.Background(), meta)
	if err != nil {
		return nil, err
	}
	s.sessionID = info.ID
	return savedSessionMsg{info: info}, nil
}

// Add stores a complete message (user, system, or a reply that did not
// stream).
func (s *saver) Add(m chat.Message, meta session.Meta) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		created, err := s.ensureSession(meta)
		if err != nil {
			return saveErrMsg{fmt.Errorf("not saved: %w", err)}
		}
		id, err := s.store.Add(context.Background(), s.sessionID, session.Message{
			Role: m.Role, Content: m.Content, Thinking: m.Thinking,
			Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend,
		})
		if err != nil {
			return saveErrMsg{fmt.Errorf("not saved: %w", err)}
		}
		s.ids = append(s.ids, id)
		return created
	})
}

// BeginReply opens a streaming reply.
func (s *saver) BeginReply(meta session.Meta) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		created, err := s.ensureSession(meta)
		if err != nil {
			return saveErrMsg{fmt.Errorf("reply not saved: %w", err)}
		}
		w, err := s.store.BeginReply(context.Background(), s.sessionID, meta)
		if err != nil {
			return saveErrMsg{fmt.Errorf("reply not saved: %w", err)}
		}
		s.reply = w
		s.ids = append(s.ids, w.ID())
		return created
	})
}

// AppendReply adds streamed text; the ReplyWriter flushes it about once a
// second.
func (s *saver) AppendReply(content, thinking string) {
	if !s.enabled() || (content == "" && thinking == "") {
		return
	}
	s.bg.Do(func() tea.Msg {
		if s.reply != nil {
			s.reply.Append(content, thinking)
		}
		return nil
	})
}

// FinishReply writes the reply's final text and numbers.
func (s *saver) FinishReply(stats engine.Stats, stopped bool) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		if s.reply == nil {
			return nil
		}
		w := s.reply
		s.reply = nil
		if err := w.Finish(storedStats(stats), stopped); err != nil {
			return saveErrMsg{fmt.Errorf("reply not saved: %w", err)}
		}
		return nil
	})
}

// TruncateTo keeps the first n stored messages and deletes the rest (for
// regenerate and edit).
func (s *saver) TruncateTo(n int) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		if s.reply != nil { // a reply still open is about to be dropped
			s.reply.Finish(session.Stats{}, true)
			s.reply = nil
		}
		if n >= len(s.ids) || s.sessionID == 0 {
			return nil
		}
		if err := s.store.DeleteMessagesFrom(context.Background(), s.sessionID, s.ids[n]); err != nil {
			return saveErrMsg{fmt.Errorf("could not drop the old turn: %w", err)}
		}
		s.ids = s.ids[:n]
		return nil
	})
}

// Detach makes the next message start a new session.
func (s *saver) Detach() {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		if s.reply != nil {
			s.reply.Finish(session.Stats{}, true)
			s.reply = nil
		}
		s.sessionID, s.ids = 0, nil
		return nil
	})
}

// Attach continues a loaded session.
func (s *saver) Attach(sess *session.Session) {
	if !s.enabled() {
		return
	}
	ids := make([]int64, len(sess.Turns))
	for i, t := range sess.Turns {
		ids[i] = t.ID
	}
	id := sess.ID
	s.bg.Do(func() tea.Msg {
		if s.reply != nil {
			s.reply.Finish(session.Stats{}, true)
			s.reply = nil
		}
		s.sessionID, s.ids = id, ids
		return nil
	})
}

// Close finishes an open reply as stopped (the user quit mid-reply).
func (s *saver) Close() {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		if s.reply != nil {
			s.reply.Finish(session.Stats{}, true)
			s.reply = nil
		}
		return nil
	})
}
