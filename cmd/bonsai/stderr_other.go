//go:build !unix

package main

import "errors"

// captureStderr would point file descriptor 2 at the log file; outside
// Unix there is no dup2 for it, and native libraries' warnings stay on the
// terminal.
func captureStderr() (restore func(), err error) {
	return nil, errors.New("redirecting stderr is not supported on this system")
}
