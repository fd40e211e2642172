//go:build !unix

package synth

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the first size bytes of f (no mmap on this platform).
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, nil, fmt.Errorf("synth: reading %s: %w", f.Name(), err)
	}
	return b, func() error { return nil }, nil
}
