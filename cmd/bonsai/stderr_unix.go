//go:build unix

package main

import (
	"os"

	"github.com/bonsai-chat/bonsai/config"
	"golang.org/x/sys/unix"
)

// captureStderr points file descriptor 2 at the log file while the chat
// runs: GPU drivers and other native libraries print warnings straight to
// stderr, which would scribble over the full-screen UI. restore puts the
// terminal back.
func captureStderr() (restore func(), err error) {
	path, err := config.LogPath()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	saved, err := unix.Dup(2)
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := unix.Dup2(int(f.Fd()), 2); err != nil {
		unix.Close(saved)
		f.Close()
		return nil, err
	}
	return func() {
		unix.Dup2(saved, 2)
		unix.Close(saved)
		f.Close()
	}, nil
}
