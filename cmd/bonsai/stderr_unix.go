//go:build unix

package main

import (
	"os"
	"runtime/debug"

	"github.com/bonsai-chat/bonsai/config"
	"golang.org/x/sys/unix"
)

// captureStderr points file descriptor 2 at the log file while the chat
// runs: GPU drivers and other native libraries print warnings straight to
// stderr, which would scribble over the full-screen UI. restore puts the
// terminal back.
func captureStderr() (restore func(), err error) {
	saved, log, err := stderrToLog()
	if err != nil {
		return nil, err
	}
	return func() {
		unix.Dup2(saved, 2)
		unix.Close(saved)
		log.Close()
	}, nil
}

// driverStderrToLog points file descriptor 2 at the log file for a command
// that may start a GPU driver (Mesa's lavapipe, for one, prints its
// XDG_RUNTIME_DIR complaint five times while the adapters are probed), and
// returns a file that still reaches the user's stderr for bonsai's own
// messages. A crash's trace goes there as well as to the log.
func driverStderrToLog() (terminal *os.File, restore func(), err error) {
	saved, log, err := stderrToLog()
	if err != nil {
		return nil, nil, err
	}
	terminal = os.NewFile(uintptr(saved), "/dev/stderr")
	_ = debug.SetCrashOutput(terminal, debug.CrashOptions{})
	return terminal, func() {
		_ = debug.SetCrashOutput(nil, debug.CrashOptions{})
		unix.Dup2(saved, 2)
		terminal.Close()
		log.Close()
	}, nil
}

// stderrToLog opens the log file and points file descriptor 2 at it,
// returning a duplicate of the old descriptor 2 and the open log.
func stderrToLog() (saved int, log *os.File, err error) {
	path, err := config.LogPath()
	if err != nil {
		return -1, nil, err
	}
	log, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return -1, nil, err
	}
	if saved, err = unix.Dup(2); err != nil {
		log.Close()
		return -1, nil, err
	}
	if err := unix.Dup2(int(log.Fd()), 2); err != nil {
		unix.Close(saved)
		log.Close()
		return -1, nil, err
	}
	return saved, log, nil
}
