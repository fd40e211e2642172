-- Frozen copy of bonsai's first session schema (user_version 1). Never edit:
-- migrate_test.go builds old databases from it.
CREATE TABLE sessions (
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
	CREATE INDEX messages_by_session ON messages(session_id, id);
