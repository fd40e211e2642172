package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/adrg/xdg"

	"github.com/bonsai-chat/bonsai/config/atomicfile"
)

// State is what the UI remembers between runs: not configuration, and not
// worth keeping as data ($XDG_STATE_HOME, per the XDG spec).
type State struct {
	// Panels records which panels were open, by the TUI's panel names.
	Panels map[string]bool `json:"panels,omitempty"`
	// LastSession is the session open when the UI last quit (0: none).
	LastSession int64 `json:"last_session,omitempty"`
	// History holds past prompts, oldest first, at most MaxHistory.
	History []string `json:"history,omitempty"`
	// RecentModels are the model files the chat ran, most recent first,
	// at most MaxRecentModels (for the /model picker).
	RecentModels []string `json:"recent_models,omitempty"`
}

// MaxRecentModels bounds State.RecentModels.
const MaxRecentModels = 10

// AddRecentModel puts path first among the recent models.
func (s *State) AddRecentModel(path string) {
	if path == "" {
		return
	}
	out := []string{path}
	for _, p := range s.RecentModels {
		if p != path && len(out) < MaxRecentModels {
			out = append(out, p)
		}
	}
	s.RecentModels = out
}

// MaxHistory bounds the prompt history kept in State.
const MaxHistory = 1000

// ErrBadState: the state file exists but is not valid JSON. LoadState still
// returns an empty State with it, so the UI can start and warn.
var ErrBadState = errors.New("state file is not valid JSON")

// StatePath is the UI state file, $XDG_STATE_HOME/bonsai/state.json
// (~/.local/state on Linux). It creates the directory.
func StatePath() (string, error) {
	p, err := xdg.StateFile("bonsai/state.json")
	if err != nil {
		return "", fmt.Errorf("state path: %w", err)
	}
	return p, nil
}

// LoadState reads the state file; a missing file gives an empty State.
func LoadState(path string) (*State, error) {
	st := &State{Panels: map[string]bool{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return &State{Panels: map[string]bool{}}, fmt.Errorf("%s: %w: %w", path, ErrBadState, err)
	}
	if st.Panels == nil {
		st.Panels = map[string]bool{}
	}
	return st, nil
}

// Save writes the state file atomically (readable by the user only: prompts
// can be private).
func (s *State) Save(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// AddHistory appends a prompt to the history, skipping blanks and an
// immediate repeat, and forgets the oldest beyond MaxHistory.
func (s *State) AddHistory(prompt string) {
	if prompt == "" || (len(s.History) > 0 && s.History[len(s.History)-1] == prompt) {
		return
	}
	s.History = append(s.History, prompt)
	if over := len(s.History) - MaxHistory; over > 0 {
		s.History = append([]string(nil), s.History[over:]...)
	}
}

// LogPath is the log file, $XDG_STATE_HOME/bonsai/bonsai.log. It creates the
// directory.
func LogPath() (string, error) {
	p, err := xdg.StateFile("bonsai/bonsai.log")
	if err != nil {
		return "", fmt.Errorf("log path: %w", err)
	}
	return p, nil
}

// OpenLog appends text-format slog records at or above level to the file at
// path. Close the returned closer on exit.
func OpenLog(path string, level slog.Level) (*slog.Logger, io.Closer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open log: %w", err)
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: level})), f, nil
}
