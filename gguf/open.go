package gguf

import (
	"fmt"
	"os"
)

// Open memory-maps the file at path read-only and parses it. The tensor data
// is never copied: Data returns views of the mapping until Close.
func Open(path string) (*File, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer forever; for a regular file it changes nothing.
	fd, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s is %s, not a regular file: %w", path, FileKind(st.Mode()), ErrNotGGUF)
	}
	size := st.Size()
	if size < 8 {
		return nil, fmt.Errorf("gguf: %s: %d-byte file: %w", path, size, ErrNotGGUF)
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("gguf: %s: %d bytes do not fit the address space", path, size)
	}
	data, unmap, err := mapFile(fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("gguf: mapping %s: %w", path, err)
	}
	f, err := parse(data)
	if err != nil {
		_ = unmap()
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.Path = path
	f.unmap = func() error {
		if err := unmap(); err != nil {
			return fmt.Errorf("gguf: unmapping %s: %w", path, err)
		}
		return nil
	}
	return f, nil
}

// Prefetch asks the kernel to start reading the whole mapping in, so that
// the first pass over the weights does not fault page by page. It is only
// advice: it returns at once, and a Parse'd (unmapped) file ignores it.
func (f *File) Prefetch() error {
	if f.unmap == nil || len(f.data) == 0 {
		return nil
	}
	return prefetch(f.data)
}

// FileKind names a file mode's type for messages ("a named pipe").
func FileKind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file"
}
