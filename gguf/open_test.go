package gguf

import (
	"bytes"
	"encoding/binary"
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

// Version 0 is no GGUF version at all, not a byte-swapped one; a real
// big-endian file (version 3 byte-swapped) still says so.
func TestVersionMessages(t *testing.T) {
	w := NewWriter()
	w.Set("general.architecture", "qwen3")
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version uint32
		want    string
		not     string
	}{
		{0, "version 0 is not a GGUF version", "byte-swapped"},
		{3 << 24, "byte-swapped", ""},
		{7, "version 7", "byte-swapped"},
	} {
		data := bytes.Clone(buf.Bytes())
		binary.LittleEndian.PutUint32(data[4:], tc.version)
		_, err := Parse(data)
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), tc.want) || (tc.not != "" && strings.Contains(err.Error(), tc.not)) {
			t.Errorf("version %#x: %v, want %q", tc.version, err, tc.want)
		}
	}
}
