//go:build !unix

package session

import "os"

// writable reports whether this process may write in dir, by creating (and
// removing) a file there.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".bonsai-write-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
