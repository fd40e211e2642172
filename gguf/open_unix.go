//go:build unix

package gguf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openNonblock keeps Open from waiting for a writer on a FIFO.
const openNonblock = unix.O_NONBLOCK

// mapFile maps size bytes of fd read-only and shared: the page cache is the
// only copy of the weights.
func mapFile(fd *os.File, size int) (data []byte, unmap func() error, err error) {
	data, err = unix.Mmap(int(fd.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return unix.Munmap(data) }, nil
}

func prefetch(data []byte) error {
	if err := unix.Madvise(data, unix.MADV_WILLNEED); err != nil {
		return fmt.Errorf("gguf: madvise: %w", err)
	}
	return nil
}
