package session

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// Info describes a session for listings.
type Info struct {
	ID       int64
	Title    string
	Model    string // model file the session was started with
	Variant  string
	Backend  string
	Messages int // number of messages
	Created  time.Time
	Updated  time.Time // last message written
}

// Stats are one reply's measurements, as the store keeps them (the store
// owns its record types: the engine's events and these change
// independently; the front end converts).
type Stats struct {
	PromptTokens int           // tokens prefilled for this reply
	GenTokens    int           // tokens generated
	PrefillTPS   float64       // prompt tokens per second
	DecodeTPS    float64       // generated tokens per second
	TTFT         time.Duration // request to first token
}

// Message is one stored turn.
type Message struct {
	ID       int64
	Role     string // chat.RoleSystem, chat.RoleUser or chat.RoleAssistant
	Content  string
	Thinking string
	// Stopped: the user stopped this reply before the model finished.
	Stopped bool
	// Interrupted: the reply never finished being written (its process
	// died, or it is still streaming in another process). Content holds what
	// was flushed.
	Interrupted bool
	Model       string
	Variant     string
	Backend     string
	Stats       Stats
	Created     time.Time
}

// Session is a conversation with its messages, oldest first.
type Session struct {
	Info
	Turns []Message
}

// Messages converts the conversation into the engine's request form. Replies
// that never got any text (an interrupted empty stream) are left out.
func (s *Session) Messages() []chat.Message {
	out := make([]chat.Message, 0, len(s.Turns))
	for _, m := range s.Turns {
		if m.Interrupted && m.Content == "" && m.Thinking == "" {
			continue
		}
		out = append(out, chat.Message{Role: m.Role, Content: m.Content, Thinking: m.Thinking})
	}
	return out
}

// Meta says what a session or message was produced with.
type Meta struct {
	Model   string
	Variant string
	Backend string
}

// Create starts an empty session. Its title comes from the first user
// message unless set by Rename.
func (s *Store) Create(ctx context.Context, meta Meta) (Info, error) {
	now := s.opts.Now()
	res, err := s.db.ExecContext(ctx,
		`INSERT INTO sessions(model, variant, backend, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		meta.Model, meta.Variant, meta.Backend, millis(now), millis(now))
	if err != nil {
		return Info{}, fmt.Errorf("create session: %w", classify(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Info{}, fmt.Errorf("create session: %w", err)
	}
	return Info{ID: id, Model: meta.Model, Variant: meta.Variant, Backend: meta.Backend,
		Created: fromMillis(millis(now)), Updated: fromMillis(millis(now))}, nil
}

const infoColumns = `s.id, s.title, s.model, s.variant, s.backend, s.created_at, s.updated_at,
	(SELECT count(*) FROM messages m WHERE m.session_id = s.id)`

func scanInfo(row interface{ Scan(...any) error }) (Info, error) {
	var in Info
	var created, updated int64
	err := row.Scan(&in.ID, &in.Title, &in.Model, &in.Variant, &in.Backend, &created, &updated, &in.Messages)
	in.Created, in.Updated = fromMillis(created), fromMillis(updated)
	return in, err
}

// List returns every session, most recently updated first.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT `+infoColumns+` FROM sessions s ORDER BY s.updated_at DESC, s.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", classify(err))
	}
	defer rows.Close()
	var out []Info
	for rows.Next() {
		in, err := scanInfo(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", classify(err))
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", classify(err))
	}
	return out, nil
}

// Info returns one session's description.
func (s *Store) Info(ctx context.Context, id int64) (Info, error) {
	in, err := scanInfo(s.db.QueryRowContext(ctx, `SELECT `+infoColumns+` FROM sessions s WHERE s.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Info{}, fmt.Errorf("session %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("session %d: %w", id, classify(err))
	}
	return in, nil
}

// Load returns a session with all its messages.
func (s *Store) Load(ctx context.Context, id int64) (*Session, error) {
	in, err := s.Info(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, role, content, thinking, stopped, complete,
		model, variant, backend, prompt_tokens, gen_tokens, prefill_tps, decode_tps, ttft_ms, created_at
		FROM messages WHERE session_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("load session %d: %w", id, classify(err))
	}
	defer rows.Close()
	sess := &Session{Info: in}
	for rows.Next() {
		var m Message
		var complete bool
		var ttftMS float64
		var created int64
		if err := rows.Scan(&m.ID, &m.Role, &m.Content, &m.Thinking, &m.Stopped, &complete,
			&m.Model, &m.Variant, &m.Backend, &m.Stats.PromptTokens, &m.Stats.GenTokens,
			&m.Stats.PrefillTPS, &m.Stats.DecodeTPS, &ttftMS, &created); err != nil {
			return nil, fmt.Errorf("load session %d: %w", id, classify(err))
		}
		m.Interrupted = !complete
		m.Stats.TTFT = time.Duration(ttftMS * float64(time.Millisecond))
		m.Created = fromMillis(created)
		sess.Turns = append(sess.Turns, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load session %d: %w", id, classify(err))
	}
	// Messages counted in Info and rows read are one snapshot only inside a
	// transaction; the rows are what we return, so count them.
	sess.Info.Messages = len(sess.Turns)
	return sess, nil
}

// Last returns the most recently updated session, or ErrNotFound when there
// is none.
func (s *Store) Last(ctx context.Context) (*Session, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT id FROM sessions ORDER BY updated_at DESC, id DESC LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("last session: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("last session: %w", classify(err))
	}
	return s.Load(ctx, id)
}

// Rename sets a session's title (trimmed; an empty title is allowed and
// shows as untitled).
func (s *Store) Rename(ctx context.Context, id int64, title string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET title = ? WHERE id = ?`, MakeTitle(title), id)
	if err != nil {
		return fmt.Errorf("rename session %d: %w", id, classify(err))
	}
	return mustHaveChanged(res, id)
}

// Delete removes a session and all its messages.
func (s *Store) Delete(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete session %d: %w", id, classify(err))
	}
	return mustHaveChanged(res, id)
}

func mustHaveChanged(res sql.Result, id int64) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("session %d: %w", id, ErrNotFound)
	}
	return nil
}

// maxTitle bounds titles taken from prompts, in runes.
const maxTitle = 80

// MakeTitle turns a prompt into a title: whitespace collapsed, trimmed, and
// cut at maxTitle runes with an ellipsis.
func MakeTitle(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if utf8.RuneCountInString(t) <= maxTitle {
		return t
	}
	r := []rune(t)
	return strings.TrimRight(string(r[:maxTitle-1]), " ") + "…"
}

// Add writes one complete message (a user prompt, a system prompt, or an
// assistant reply produced without streaming, or stored late) and returns
// its id; a reply with Interrupted set stays marked interrupted. The first
// user message titles an untitled session.
func (s *Store) Add(ctx context.Context, sessionID int64, m Message) (int64, error) {
	id, _, err := s.add(ctx, sessionID, m)
	return id, err
}

// AddAfter is Add for a writer that holds the session as it last saw it:
// after is the id of the last message it knows the session to hold (0: it
// knows none). When the session's last message is another, a second writer
// (another bonsai on the same session) has added to it or removed from it:
// the message is still written, and its id comes back with an error
// wrapping ErrChanged, so that the writer can say that the turns
// interleave.
func (s *Store) AddAfter(ctx context.Context, sessionID, after int64, m Message) (int64, error) {
	id, last, err := s.add(ctx, sessionID, m)
	if err != nil {
		return 0, err
	}
	return id, changedUnder(sessionID, after, last)
}

// add writes m and returns its id and the id of the message that was the
// session's last before it (0: none).
func (s *Store) add(ctx context.Context, sessionID int64, m Message) (id, last int64, err error) {
	if !validRole(m.Role) {
		return 0, 0, fmt.Errorf("add message: unknown role %q", m.Role)
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		if last, err = lastMessage(ctx, tx, sessionID); err != nil {
			return err
		}
		id, err = insertMessage(ctx, tx, sessionID, m, !m.Interrupted, s.opts.Now())
		if err != nil {
			return err
		}
		if m.Role == chat.RoleUser {
			_, err = tx.ExecContext(ctx, `UPDATE sessions SET title = ? WHERE id = ? AND title = ''`, MakeTitle(m.Content), sessionID)
		}
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("session %d: add %s message: %w", sessionID, m.Role, err)
	}
	return id, last, nil
}

// lastMessage is the id of the session's newest message, 0 when it has
// none.
func lastMessage(ctx context.Context, tx *sql.Tx, sessionID int64) (int64, error) {
	var last int64
	err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages WHERE session_id = ?`, sessionID).Scan(&last)
	return last, err
}

// changedUnder is ErrChanged when the session's last message before a
// write (last) is not the one the writer last saw (after).
func changedUnder(sessionID, after, last int64) error {
	if last == after {
		return nil
	}
	return fmt.Errorf("session %d: its last message is %d, not %d as this chat last saw: %w", sessionID, last, after, ErrChanged)
}

func validRole(r string) bool {
	return r == chat.RoleSystem || r == chat.RoleUser || r == chat.RoleAssistant
}

// insertMessage adds a message row and bumps the session's update time.
func insertMessage(ctx context.Context, tx *sql.Tx, sessionID int64, m Message, complete bool, now time.Time) (int64, error) {
	res, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, millis(now), sessionID)
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, ErrNotFound
	}
	res, err = tx.ExecContext(ctx, `INSERT INTO messages(session_id, role, content, thinking, stopped, complete,
		model, variant, backend, prompt_tokens, gen_tokens, prefill_tps, decode_tps, ttft_ms, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sessionID, m.Role, m.Content, m.Thinking, m.Stopped, complete,
		m.Model, m.Variant, m.Backend, m.Stats.PromptTokens, m.Stats.GenTokens,
		m.Stats.PrefillTPS, m.Stats.DecodeTPS, float64(m.Stats.TTFT)/float64(time.Millisecond), millis(now))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// DeleteMessages removes exactly the messages drop from the session, in one
// transaction: the tail that regenerating or editing a turn replaces.
// Messages another process added to the session stay. keep are the ids the
// caller still holds for the session; when, after the deletion, the session
// holds other messages than keep, or some of drop were already gone, the
// session changed underneath the caller: the deletion is still done, and the
// error wraps ErrChanged. A reply still streaming into a removed message is
// no longer saved.
func (s *Store) DeleteMessages(ctx context.Context, sessionID int64, keep, drop []int64) error {
	var missing, foreign int
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, millis(s.opts.Now()), sessionID)
		if err != nil {
			return err
		}
		if err := mustHaveChanged(res, sessionID); err != nil {
			return err
		}
		for _, id := range drop {
			res, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE session_id = ? AND id = ?`, sessionID, id)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				missing++
			}
		}
		known := make(map[int64]bool, len(keep))
		for _, id := range keep {
			known[id] = true
		}
		rows, err := tx.QueryContext(ctx, `SELECT id FROM messages WHERE session_id = ?`, sessionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		held := 0
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if known[id] {
				held++
			} else {
				foreign++
			}
		}
		missing += len(known) - held
		return rows.Err()
	})
	if err != nil {
		return fmt.Errorf("session %d: delete %d messages: %w", sessionID, len(drop), err)
	}
	if missing > 0 || foreign > 0 {
		return fmt.Errorf("session %d: %d messages written by another process, %d removed by one: %w", sessionID, foreign, missing, ErrChanged)
	}
	return nil
}
