package tui

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	tea "github.com/charmbracelet/bubbletea"
)

// saveRetryEvery is how often unsaved messages are tried again.
const saveRetryEvery = 2 * time.Second

// saver keeps the conversation in the session store. Its fields belong to
// the background goroutine: the UI only queues jobs (the methods below), so
// message ids and the open ReplyWriter never cross goroutines.
//
// The saver holds one slot per stored transcript entry (user, system and
// assistant), in transcript order, which is how the UI names messages (by
// position), never by database id. A slot keeps its message until the
// database has it, so a write that fails (the database locked by another
// process, a full disk) loses nothing: it stays queued, later slots wait
// behind it so that the stored order is the transcript's, and every sync
// tries again. A slot's id is set only by a write that succeeded, so the
// ids the saver deletes by are always the database's.
type saver struct {
	store     *session.Store
	bg        *background
	sessionID int64 // 0: no session yet (created with the first message)
	meta      session.Meta
	slots     []*slot
	drop      []int64 // ids of replaced messages not deleted yet
}

// slot is one transcript entry's message and how far it got into the store.
type slot struct {
	msg       session.Message // for a reply: the text so far, then its stats and stop
	id        int64           // 0: not in the database yet
	reply     bool            // a streamed reply
	streaming bool            // the reply has not finished
	stored    bool            // the database holds the message as it ends
	w         *session.ReplyWriter
}

// saveStateMsg tells the UI how saving stands after a sync.
type saveStateMsg struct {
	created *session.Info // the conversation now lives in this new session
	unsaved int           // messages the database does not have yet
	err     error         // why, when unsaved > 0
	notice  string        // something the user should know (another process changed the chat)
}

// saveErrMsg: something other than a message could not be saved (the state
// file).
type saveErrMsg struct{ err error }

func (s *saver) enabled() bool { return s != nil && s.store != nil }

// Add stores a complete message (user, system, or a reply that did not
// stream).
func (s *saver) Add(m chat.Message, meta session.Meta) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		s.slots = append(s.slots, &slot{msg: session.Message{
			Role: m.Role, Content: m.Content, Thinking: m.Thinking,
			Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend,
		}})
		s.meta = meta
		return s.sync()
	})
}

// BeginReply opens a streaming reply.
func (s *saver) BeginReply(meta session.Meta) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		s.slots = append(s.slots, &slot{reply: true, streaming: true, msg: session.Message{
			Role: chat.RoleAssistant, Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend,
		}})
		s.meta = meta
		return s.sync()
	})
}

// AppendReply adds streamed text; the ReplyWriter flushes it about once a
// second.
func (s *saver) AppendReply(content, thinking string) {
	if !s.enabled() || (content == "" && thinking == "") {
		return
	}
	s.bg.Do(func() tea.Msg {
		sl := s.streamingReply()
		if sl == nil {
			return nil
		}
		sl.msg.Content += content
		sl.msg.Thinking += thinking
		if sl.w != nil {
			sl.w.Append(content, thinking)
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
		if !s.finish(storedStats(stats), stopped) {
			return nil
		}
		return s.sync()
	})
}

// InterruptReply stores the streaming reply with all its text and numbers,
// marked interrupted: the process is ending before the reply did.
func (s *saver) InterruptReply(stats engine.Stats) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		sl := s.streamingReply()
		if sl == nil {
			return nil
		}
		sl.msg.Interrupted = true
		s.finish(storedStats(stats), false)
		return s.sync()
	})
}

// finish ends the streaming reply, if any, in its slot; sync writes it.
func (s *saver) finish(stats session.Stats, stopped bool) bool {
	sl := s.streamingReply()
	if sl == nil {
		return false
	}
	sl.streaming = false
	sl.msg.Stats, sl.msg.Stopped = stats, stopped
	return true
}

func (s *saver) streamingReply() *slot {
	if n := len(s.slots); n > 0 && s.slots[n-1].streaming {
		return s.slots[n-1]
	}
	return nil
}

// TruncateTo keeps the first n stored messages and deletes the rest (for
// regenerate and edit): exactly those, by id, never another process's.
func (s *saver) TruncateTo(n int) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		if n >= len(s.slots) {
			return nil
		}
		for _, sl := range s.slots[n:] {
			if sl.w != nil {
				sl.w.Finish(sl.msg.Stats, true) // it is deleted next: only stop its writer
			}
			if sl.id != 0 {
				s.drop = append(s.drop, sl.id)
			}
		}
		s.slots = s.slots[:n]
		return s.sync()
	})
}

// Retry tries the unsaved messages again.
func (s *saver) Retry() {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg { return s.sync() })
}

// Detach makes the next message start a new session.
func (s *saver) Detach() {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		msg := s.flushAll()
		s.sessionID, s.slots, s.drop = 0, nil, nil
		return msg
	})
}

// Attach continues a loaded session.
func (s *saver) Attach(sess *session.Session) {
	if !s.enabled() {
		return
	}
	slots := make([]*slot, len(sess.Turns))
	for i, t := range sess.Turns {
		slots[i] = &slot{msg: t, id: t.ID, reply: t.Role == chat.RoleAssistant, stored: true}
	}
	id := sess.ID
	s.bg.Do(func() tea.Msg {
		msg := s.flushAll()
		s.sessionID, s.slots, s.drop = id, slots, nil
		return msg
	})
}

// flushAll closes the conversation being left: an open reply finishes as
// stopped, and everything is tried once more. What still fails is reported
// (and lost: the UI has moved on).
func (s *saver) flushAll() tea.Msg {
	s.finish(s.lastStats(), true)
	st := s.sync()
	if st.unsaved == 0 {
		return st
	}
	return saveErrMsg{fmt.Errorf("%d messages of the previous chat could not be saved: %w", st.unsaved, st.err)}
}

func (s *saver) lastStats() session.Stats {
	if sl := s.streamingReply(); sl != nil {
		return sl.msg.Stats
	}
	return session.Stats{}
}

// Close finishes an open reply as stopped (the user quit mid-reply) with the
// statistics it had reached (stats), and makes a last attempt at whatever
// is unsaved.
func (s *saver) Close(stats engine.Stats) {
	if !s.enabled() {
		return
	}
	s.bg.Do(func() tea.Msg {
		if sl := s.streamingReply(); sl != nil {
			sl.msg.Stats = storedStats(stats)
		}
		return s.flushAll()
	})
}

// sync writes what the database lacks, in order, stopping at the first
// failure so that nothing is stored out of order.
func (s *saver) sync() saveStateMsg {
	var out saveStateMsg
	err := s.syncOnce(&out)
	if errors.Is(err, session.ErrNotFound) && s.sessionID != 0 {
		if _, ierr := s.store.Info(context.Background(), s.sessionID); errors.Is(ierr, session.ErrNotFound) {
			// Another process deleted this chat: store it again, whole, as
			// a new session, rather than lose what is on the screen.
			s.sessionID, s.drop = 0, nil
			for _, sl := range s.slots {
				if sl.w != nil {
					sl.w.Finish(sl.msg.Stats, true)
				}
				sl.id, sl.stored, sl.w = 0, false, nil
			}
			out.notice = "this chat was deleted by another bonsai; it is saved again as a new chat"
		} else if sl := s.firstUnstored(); sl != nil && sl.id != 0 {
			// Only the reply's row went (another process replaced it):
			// store it afresh, whole.
			sl.id, sl.w = 0, nil
			out.notice = "another bonsai removed a reply of this chat; it is saved again"
		}
		err = s.syncOnce(&out)
	}
	out.err = err
	for _, sl := range s.slots {
		if !sl.stored && (!sl.streaming || sl.w == nil) {
			out.unsaved++
		} else if sl.w != nil && sl.w.Err() != nil {
			out.unsaved++
			out.err = sl.w.Err()
		}
	}
	out.unsaved += len(s.drop)
	if out.unsaved == 0 {
		out.err = nil
	}
	return out
}

func (s *saver) firstUnstored() *slot {
	for _, sl := range s.slots {
		if !sl.stored {
			return sl
		}
	}
	return nil
}

func (s *saver) syncOnce(out *saveStateMsg) error {
	ctx := context.Background()
	if len(s.drop) > 0 && s.sessionID != 0 {
		var keep []int64
		for _, sl := range s.slots {
			if sl.id != 0 {
				keep = append(keep, sl.id)
			}
		}
		err := s.store.DeleteMessages(ctx, s.sessionID, keep, s.drop)
		switch {
		case errors.Is(err, session.ErrChanged):
			out.notice = "another bonsai has changed this chat too: " + err.Error()
		case err != nil:
			return fmt.Errorf("could not drop the replaced messages: %w", err)
		}
		s.drop = nil
	}
	for i, sl := range s.slots {
		if sl.stored {
			continue
		}
		if s.sessionID == 0 {
			info, err := s.store.Create(ctx, s.meta)
			if err != nil {
				return fmt.Errorf("not saved: %w", err)
			}
			s.sessionID = info.ID
			out.created = &info
		}
		var after int64 // the message this chat last saw in the session
		if i > 0 {
			after = s.slots[i-1].id
		}
		if err := s.write(ctx, sl, after, out); err != nil {
			return err
		}
	}
	return nil
}

// write stores one slot as far as it has got; a new message goes after
// after, and when another bonsai wrote to the session since, out's notice
// says that the turns interleave.
func (s *saver) write(ctx context.Context, sl *slot, after int64, out *saveStateMsg) error {
	changed := func(err error) bool {
		if errors.Is(err, session.ErrChanged) {
			out.notice = "another bonsai has changed this chat too; its turns and these interleave"
			return true
		}
		return false
	}
	switch {
	case sl.id == 0 && sl.streaming:
		w, err := s.store.BeginReplyAfter(ctx, s.sessionID, after, session.Meta{Model: sl.msg.Model, Variant: sl.msg.Variant, Backend: sl.msg.Backend})
		if err != nil && !changed(err) {
			return fmt.Errorf("reply not saved: %w", err)
		}
		w.Append(sl.msg.Content, sl.msg.Thinking)
		sl.id, sl.w = w.ID(), w
	case sl.id == 0:
		id, err := s.store.AddAfter(ctx, s.sessionID, after, sl.msg)
		if err != nil && !changed(err) {
			return fmt.Errorf("not saved: %w", err)
		}
		sl.id, sl.stored = id, true
	case sl.streaming:
		// The reply's writer flushes it; Finish completes it.
	default:
		end := func() error { return sl.w.Finish(sl.msg.Stats, sl.msg.Stopped) }
		if sl.msg.Interrupted {
			end = func() error { return sl.w.Interrupt(sl.msg.Stats) }
		}
		if err := end(); err != nil {
			return fmt.Errorf("reply not saved: %w", err)
		}
		sl.stored, sl.w = true, nil
	}
	return nil
}
