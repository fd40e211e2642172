//go:build !unix

package main

import (
	"errors"
	"os"
)

// captureStderr would point file descriptor 2 at the log file; outside
// Unix there is no dup2 for it, and native libraries' warnings stay on the
// terminal.
func captureStderr() (restore func(), err error) {
	return nil, errors.New("redirecting stderr is not supported on this system")
}

// driverStderrToLog would keep GPU drivers' warnings off the terminal; see
// captureStderr.
func driverStderrToLog() (terminal *os.File, restore func(), err error) {
	return nil, nil, errors.New("redirecting stderr is not supported on this system")
}
