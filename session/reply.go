package session

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// ReplyWriter stores an assistant reply while it streams. Append is cheap
// (memory only) and may be called per token from the UI goroutine; a
// background goroutine writes the text so far at most once per FlushInterval
// (1s by default), so a crash loses at most about that much. Finish writes the
// final text and statistics.
type ReplyWriter struct {
	store     *Store
	sessionID int64
	id        int64

	mu       sync.Mutex
	content  strings.Builder
	thinking strings.Builder
	dirty    bool  // appended since the last write
	err      error // the last background write's failure, if it has not succeeded since
	done     bool  // no more appends or flushes
	finished bool  // the final write succeeded (or the store closed the writer)

	// writeMu orders writes, so an older snapshot never lands after a newer
	// one.
	writeMu sync.Mutex
	stop    chan struct{}
	flusher sync.WaitGroup
	writes  atomic.Int64 // successful writes, for tests of the write rate
}

// BeginReply creates an (incomplete) assistant message in the session and
// returns a writer for its text.
func (s *Store) BeginReply(ctx context.Context, sessionID int64, meta Meta) (*ReplyWriter, error) {
	w, _, err := s.beginReply(ctx, sessionID, meta)
	return w, err
}

// BeginReplyAfter is BeginReply for a writer that holds the session as it
// last saw it, as AddAfter is Add's: when the session's last message is not
// after, the reply is still begun, and its writer comes back with an error
// wrapping ErrChanged.
func (s *Store) BeginReplyAfter(ctx context.Context, sessionID, after int64, meta Meta) (*ReplyWriter, error) {
	w, last, err := s.beginReply(ctx, sessionID, meta)
	if err != nil {
		return nil, err
	}
	return w, changedUnder(sessionID, after, last)
}

// beginReply starts the reply and returns its writer and the id of the
// message that was the session's last before it.
func (s *Store) beginReply(ctx context.Context, sessionID int64, meta Meta) (*ReplyWriter, int64, error) {
	var id, last int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		if last, err = lastMessage(ctx, tx, sessionID); err != nil {
			return err
		}
		id, err = insertMessage(ctx, tx, sessionID, Message{
			Role: chat.RoleAssistant, Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend,
		}, false, s.opts.Now())
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("session %d: begin reply: %w", sessionID, err)
	}
	w := &ReplyWriter{store: s, sessionID: sessionID, id: id, stop: make(chan struct{})}
	s.mu.Lock()
	s.writers[w] = struct{}{}
	s.mu.Unlock()
	w.flusher.Add(1)
	go w.flushLoop(s.opts.FlushInterval)
	return w, last, nil
}

// ID is the reply's message id.
func (w *ReplyWriter) ID() int64 { return w.id }

// Append adds streamed text to the reply's content and thinking parts.
func (w *ReplyWriter) Append(text, thinking string) {
	if text == "" && thinking == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.content.WriteString(text)
	w.thinking.WriteString(thinking)
	w.dirty = true
}

// Err reports the last background write's failure (nil once a later write
// succeeded), so the UI can warn that the reply is not being saved.
func (w *ReplyWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *ReplyWriter) flushLoop(every time.Duration) {
	defer w.flusher.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			w.Flush()
		}
	}
}

// Flush writes the text so far now, if anything was appended since the last
// write.
func (w *ReplyWriter) Flush() error {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	w.mu.Lock()
	if !w.dirty || w.done {
		w.mu.Unlock()
		return nil
	}
	content, thinking := w.content.String(), w.thinking.String()
	w.dirty = false
	w.mu.Unlock()

	err := w.write(content, thinking, nil)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
	if err != nil {
		w.dirty = true // try again next tick
	}
	return err
}

// finalState is what Finish (or Interrupt) adds to the last write.
type finalState struct {
	stats       Stats
	stopped     bool
	interrupted bool // the reply stays marked interrupted (complete = 0)
}

func (w *ReplyWriter) write(content, thinking string, final *finalState) error {
	s := w.store
	ctx := context.Background()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		if final == nil {
			// complete = 0: a flush that lost a race with Finish must not
			// overwrite the final text with an older one.
			_, err = tx.ExecContext(ctx, `UPDATE messages SET content = ?, thinking = ? WHERE id = ? AND complete = 0`, content, thinking, w.id)
		} else {
			st := final.stats
			var res sql.Result
			res, err = tx.ExecContext(ctx, `UPDATE messages SET content = ?, thinking = ?, stopped = ?, complete = ?,
				prompt_tokens = ?, gen_tokens = ?, prefill_tps = ?, decode_tps = ?, ttft_ms = ? WHERE id = ?`,
				content, thinking, final.stopped, !final.interrupted, st.PromptTokens, st.GenTokens, st.PrefillTPS, st.DecodeTPS,
				float64(st.TTFT)/float64(time.Millisecond), w.id)
			if err == nil {
				if n, _ := res.RowsAffected(); n == 0 {
					return fmt.Errorf("message %d: %w", w.id, ErrNotFound)
				}
			}
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, millis(s.opts.Now()), w.sessionID)
		return err
	})
	if err != nil {
		return fmt.Errorf("session %d: save reply %d: %w", w.sessionID, w.id, err)
	}
	w.writes.Add(1)
	return nil
}

// Finish writes the complete reply with its statistics; stopped records that
// the user cut it short. The writer takes no more text afterwards. When the
// write fails (the database locked, the disk full) the last flushed text
// stays, marked interrupted, and Finish may be called again to retry; once it
// has succeeded, or after Store.Close, it fails with ErrClosed. A reply whose
// message is gone (deleted, with its session or by another process) fails
// with ErrNotFound.
func (w *ReplyWriter) Finish(stats Stats, stopped bool) error {
	return w.end(&finalState{stats: stats, stopped: stopped})
}

// Interrupt writes the reply's whole text so far with its statistics, and
// leaves it marked interrupted: the process is ending (a signal, the
// terminal gone) before the reply did. Like Finish, it may be retried after
// a failure.
func (w *ReplyWriter) Interrupt(stats Stats) error {
	return w.end(&finalState{stats: stats, interrupted: true})
}

func (w *ReplyWriter) end(final *finalState) error {
	w.mu.Lock()
	finished := w.finished
	w.mu.Unlock()
	if finished {
		return fmt.Errorf("reply %d: %w", w.id, ErrClosed)
	}
	w.close()
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	if err := w.write(w.content.String(), w.thinking.String(), final); err != nil {
		return err
	}
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	return nil
}

// abandon is Store.Close's last flush of a reply that was never finished.
func (w *ReplyWriter) abandon() error {
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	if !w.close() {
		return nil
	}
	w.mu.Lock()
	dirty := w.dirty
	w.mu.Unlock()
	if !dirty {
		return nil
	}
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	return w.write(w.content.String(), w.thinking.String(), nil)
}

// close stops appends and the flush loop; it reports false if the writer was
// already closed.
func (w *ReplyWriter) close() bool {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return false
	}
	w.done = true
	w.mu.Unlock()
	close(w.stop)
	w.flusher.Wait()
	w.store.mu.Lock()
	delete(w.store.writers, w)
	w.store.mu.Unlock()
	return true
}
