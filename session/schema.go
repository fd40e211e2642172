package session

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] brings the schema from version i to i+1 (PRAGMA user_version).
// Never edit a released migration: append a new one. testdata/schema_v1.sql
// keeps a frozen copy of the first schema for the migration test.
var migrations = []string{
	// 1: sessions and messages. Times are Unix milliseconds. A message with
	// complete = 0 is a reply still streaming, or one whose process died.
	`CREATE TABLE sessions (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		title      TEXT    NOT NULL DEFAULT '',
		model      TEXT    NOT NULL DEFAULT '',
		variant    TEXT    NOT NULL DEFAULT '',
		backend    TEXT    NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE INDEX sessions_by_update ON sessions(updated_at DESC, id DESC);
	CREATE TABLE messages (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		session_id    INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
		role          TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
		content       TEXT    NOT NULL DEFAULT '',
		thinking      TEXT    NOT NULL DEFAULT '',
		stopped       INTEGER NOT NULL DEFAULT 0,
		complete      INTEGER NOT NULL DEFAULT 1,
		model         TEXT    NOT NULL DEFAULT '',
		variant       TEXT    NOT NULL DEFAULT '',
		backend       TEXT    NOT NULL DEFAULT '',
		prompt_tokens INTEGER NOT NULL DEFAULT 0,
		gen_tokens    INTEGER NOT NULL DEFAULT 0,
		prefill_tps   REAL    NOT NULL DEFAULT 0,
		decode_tps    REAL    NOT NULL DEFAULT 0,
		ttft_ms       REAL    NOT NULL DEFAULT 0,
		created_at    INTEGER NOT NULL
	);
	CREATE INDEX messages_by_session ON messages(session_id, id);`,

	// 2: full-text search over what was said (and thought), kept in step with
	// messages by triggers; existing messages are indexed by 'rebuild'.
	`CREATE VIRTUAL TABLE messages_fts USING fts5(
		content, thinking,
		content = 'messages', content_rowid = 'id',
		tokenize = 'unicode61 remove_diacritics 2'
	);
	CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
		INSERT INTO messages_fts(rowid, content, thinking) VALUES (new.id, new.content, new.thinking);
	END;
	CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
		INSERT INTO messages_fts(messages_fts, rowid, content, thinking) VALUES ('delete', old.id, old.content, old.thinking);
	END;
	CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, thinking ON messages BEGIN
		INSERT INTO messages_fts(messages_fts, rowid, content, thinking) VALUES ('delete', old.id, old.content, old.thinking);
		INSERT INTO messages_fts(rowid, content, thinking) VALUES (new.id, new.content, new.thinking);
	END;
	INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');`,

	// 3: settings a chat changed for itself (/set in the chat: sampling,
	// max tokens), a JSON object of strings, restored on resume.
	`CREATE TABLE session_settings (
		session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
		settings   TEXT    NOT NULL DEFAULT '{}'
	);`,
}

// SchemaVersion is the schema this build writes.
var SchemaVersion = len(migrations)

// migrate brings the database to SchemaVersion and into WAL mode. Pending
// migrations run in one IMMEDIATE transaction, so two processes opening a new
// database at once cannot both apply a step. A new database gets bonsai's
// application id in that same first transaction and switches to WAL only
// afterwards: that way the id is in the main file's header (which Open checks
// before letting SQLite write) from the very first commit.
func (s *Store) migrate(ctx context.Context) error {
	// The common case, an up-to-date database, needs no write lock: opening
	// must not wait for another process's transaction.
	var current int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", classify(err))
	}
	if current > len(migrations) {
		return fmt.Errorf("%w: schema %d, this build knows up to %d", ErrTooNew, current, len(migrations))
	}
	if current < len(migrations) {
		if err := s.applyMigrations(ctx); err != nil {
			return err
		}
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", classify(err))
	}
	if mode != "wal" {
		if _, err := s.db.ExecContext(ctx, "PRAGMA journal_mode = WAL"); err != nil {
			return fmt.Errorf("enable WAL: %w", classify(err))
		}
	}
	return nil
}

// applyMigrations runs the missing migrations in one IMMEDIATE transaction,
// re-reading the version under the lock.
func (s *Store) applyMigrations(ctx context.Context) error {
	return s.withTx(ctx, func(tx *sql.Tx) error {
		var version int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if version > len(migrations) {
			return fmt.Errorf("%w: schema %d, this build knows up to %d", ErrTooNew, version, len(migrations))
		}
		if version == 0 {
			// A non-fresh file passed checkHeader with our id, so version 0
			// here only happens for a new file (or one another process is
			// creating right now, which the IMMEDIATE lock serialises).
			var objects int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&objects); err != nil {
				return fmt.Errorf("read schema: %w", err)
			}
			if objects != 0 {
				return fmt.Errorf("schema version 0 but %d objects: %w", objects, ErrForeignDatabase)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
				return fmt.Errorf("set application id: %w", err)
			}
		}
		for v := version; v < len(migrations); v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate schema %d→%d: %w", v, v+1, err)
			}
		}
		if version < len(migrations) {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
				return fmt.Errorf("set schema version: %w", err)
			}
		}
		return nil
	})
}
