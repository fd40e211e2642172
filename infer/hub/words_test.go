package hub

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Errors read in the user's words: the file and what is wrong with it, not
// the package, the system call or a second copy of the path.
func TestErrorsInUsersWords(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "y.gguf")
	_, err := Resolve(missing, dir)
	if want := "model file " + missing + ": no such file or directory"; err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing model file: %v, want %q (fs.ErrNotExist)", err, want)
	}

	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o644)
	_, err = Download(context.Background(), Model{Name: "m", File: "m.gguf", Source: "http://127.0.0.1:1/m.gguf"}, filepath.Join(blocker, "models"), Options{})
	if err == nil {
		t.Fatal("a models directory under a file was created")
	}
	for _, word := range []string{"hub:", "mkdir", "stat "} {
		if strings.Contains(err.Error(), word) {
			t.Errorf("%q says %q", err, word)
		}
	}
	if !strings.Contains(err.Error(), "cannot create the models directory "+filepath.Join(blocker, "models")) {
		t.Errorf("%q does not say which directory it could not create", err)
	}
}
