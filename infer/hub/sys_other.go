//go:build !unix

package hub

import (
	"errors"
	"os"
)

// lockFile cannot lock outside Unix (the static build for Windows): two
// pulls of one model there are not kept apart.
func lockFile(*os.File) (busy bool, err error) { return false, nil }

// freeSpace is unknown outside Unix; the caller then skips its check.
func freeSpace(string) (int64, error) {
	return 0, errors.New("free space is not known on this system")
}
