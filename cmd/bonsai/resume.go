package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"path/filepath"

	"github.com/adrg/xdg"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
)

// chatStateDir is where the chat keeps its sessions' saved model state
// (infer/engine/resume.go): under the XDG cache directory, one folder per
// conversation database, since session ids are the database's.
func chatStateDir(dbPath string) string {
	if abs, err := filepath.Abs(dbPath); err == nil {
		dbPath = abs
	}
	sum := sha256.Sum256([]byte(dbPath))
	return filepath.Join(xdg.CacheHome, "bonsai", "state", hex.EncodeToString(sum[:6]))
}

// pruneChatStates deletes the saved states of sessions deleted since they
// were saved (the chat's session list deletes without the engine).
func pruneChatStates(store *session.Store, dir string) {
	list, err := store.List(context.Background())
	if err != nil {
		return
	}
	live := make(map[int64]bool, len(list))
	for _, in := range list {
		live[in.ID] = true
	}
	if err := engine.PruneSavedStates(dir, func(id int64) bool { return live[id] }); err != nil {
		slog.Warn("pruning saved model states", "dir", dir, "err", err)
	}
}
