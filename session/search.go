package session

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Hit is one message matching a search.
type Hit struct {
	SessionID int64
	Title     string // the session's
	MessageID int64
	Role      string
	// Snippet is a short excerpt around the match, with matched words between
	// SearchOptions.Open and Close.
	Snippet string
	Created time.Time
}

// SearchOptions shape results; the zero value gives the defaults.
type SearchOptions struct {
	Limit       int    // default 50
	Open, Close string // match markers; default "**" and "**" (bold in markdown)
}

// Search finds messages, in every session, whose text or thinking contains
// all the words of query (case- and accent-insensitive; a word ending in '*'
// matches as a prefix). Best matches first.
func (s *Store) Search(ctx context.Context, query string, opts SearchOptions) ([]Hit, error) {
	match := ftsQuery(query)
	if match == "" {
		return nil, nil
	}
	if opts.Limit <= 0 {
		opts.Limit = 50
	}
	if opts.Open == "" && opts.Close == "" {
		opts.Open, opts.Close = "**", "**"
	}
	// snippet column -1: from whichever column matched best; 16 tokens.
	rows, err := s.db.QueryContext(ctx, `SELECT m.session_id, s.title, m.id, m.role,
			snippet(messages_fts, -1, ?, ?, '…', 16), m.created_at
		FROM messages_fts
		JOIN messages m ON m.id = messages_fts.rowid
		JOIN sessions s ON s.id = m.session_id
		WHERE messages_fts MATCH ?
		ORDER BY rank, m.id DESC
		LIMIT ?`, opts.Open, opts.Close, match, opts.Limit)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", query, classify(err))
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		var created int64
		if err := rows.Scan(&h.SessionID, &h.Title, &h.MessageID, &h.Role, &h.Snippet, &created); err != nil {
			return nil, fmt.Errorf("search %q: %w", query, classify(err))
		}
		h.Created = fromMillis(created)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search %q: %w", query, classify(err))
	}
	return hits, nil
}

// ftsQuery turns what a user types into an FTS5 query that cannot be a syntax
// error: every word becomes a quoted string (so punctuation and FTS operators
// are taken literally), all of them required; a trailing '*' makes a prefix
// query.
func ftsQuery(q string) string {
	var terms []string
	// NUL would cut the query short inside SQLite; treat it as a space.
	for _, w := range strings.Fields(strings.ReplaceAll(q, "\x00", " ")) {
		prefix := strings.HasSuffix(w, "*")
		w = strings.TrimRight(w, "*")
		if w == "" {
			continue
		}
		term := `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
		if prefix {
			term += "*"
		}
		terms = append(terms, term)
	}
	return strings.Join(terms, " AND ")
}
