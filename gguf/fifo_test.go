package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO (or any non-regular file) as the path is refused at once: opening
// one for reading used to wait forever for a writer.
func TestOpenRefusesAFIFOWithoutBlocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(path)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotGGUF) || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("Open(fifo) = %v, want ErrNotGGUF naming a named pipe", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the stuck open so the test binary can exit.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("Open(fifo) blocked")
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotGGUF) || !strings.Contains(err.Error(), "directory") {
		t.Errorf("Open(dir) = %v", err)
	}
}
