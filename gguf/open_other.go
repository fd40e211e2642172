//go:build !unix

package gguf

import (
	"io"
	"os"
)

// openNonblock is not needed where there are no FIFOs to open.
const openNonblock = 0

// mapFile reads the file into memory where bonsai has no mmap binding (the
// static build for Windows): the same views, at the cost of a copy.
func mapFile(fd *os.File, size int) (data []byte, unmap func() error, err error) {
	data = make([]byte, size)
	if _, err := io.ReadFull(fd, data); err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

func prefetch([]byte) error { return nil }
