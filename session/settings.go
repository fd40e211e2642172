package session

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Settings are what a chat changed for itself while it ran (the chat's
// /set: temperature, top_p, max_tokens, ...), by name, as typed: the chat
// checks them, the store keeps them with the session so that resuming it
// restores them.
type Settings map[string]string

// maxSettingsBytes bounds what one session's settings may take: a handful
// of numbers fits in far less, and a larger value is a mistake, not a
// setting.
const maxSettingsBytes = 64 << 10

// ErrSettingsTooLarge: the settings given would take more than the store
// keeps for one session.
var ErrSettingsTooLarge = errors.New("settings too large")

// SetSettings replaces the settings of a session (empty: none).
func (s *Store) SetSettings(ctx context.Context, sessionID int64, settings Settings) error {
	if settings == nil {
		settings = Settings{}
	}
	data, err := json.Marshal(settings)
	if err != nil {
		return fmt.Errorf("session %d: settings: %w", sessionID, err)
	}
	if len(data) > maxSettingsBytes {
		return fmt.Errorf("session %d: %w (%d bytes; at most %d)", sessionID, ErrSettingsTooLarge, len(data), maxSettingsBytes)
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, sessionID).Scan(&one); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO session_settings(session_id, settings) VALUES (?, ?)
			ON CONFLICT(session_id) DO UPDATE SET settings = excluded.settings`, sessionID, string(data))
		return err
	})
	if err != nil {
		return fmt.Errorf("session %d: save settings: %w", sessionID, err)
	}
	return nil
}

// Settings reads the settings of a session: empty when it has none. A
// stored value that is not a JSON object of strings (written by hand) is
// an error, not a crash.
func (s *Store) Settings(ctx context.Context, sessionID int64) (Settings, error) {
	var data string
	err := s.db.QueryRowContext(ctx, `SELECT settings FROM session_settings WHERE session_id = ?`, sessionID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return Settings{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session %d: read settings: %w", sessionID, err)
	}
	settings := Settings{}
	if err := json.Unmarshal([]byte(data), &settings); err != nil {
		return nil, fmt.Errorf("session %d: stored settings are damaged: %w", sessionID, err)
	}
	return settings, nil
}
