package session

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adrg/xdg"
)

// A read-only XDG_DATA_HOME is refused with its path; the database never
// moves to the system-wide XDG_DATA_DIRS (where adrg/xdg's DataFile falls
// back to), where the next normal run would not find the chats.
func TestReadOnlyDataHomeIsRefused(t *testing.T) {
	home := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Root writes through permission bits: a read-only mount it is.
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", home).CombinedOutput(); err != nil {
			t.Skipf("mount: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", home).Run() })
	} else {
		if err := os.Chmod(home, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(home, 0o755) })
	}
	system := t.TempDir()
	t.Setenv("XDG_DATA_HOME", home)
	t.Setenv("XDG_DATA_DIRS", system)
	xdg.Reload()
	defer xdg.Reload()

	p, err := DefaultPath()
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), filepath.Join(home, "bonsai")) {
		t.Errorf("DefaultPath = %q, %v; want ErrReadOnly naming %s", p, err, home)
	}
	if entries, _ := os.ReadDir(system); len(entries) != 0 {
		t.Errorf("something was created in XDG_DATA_DIRS: %v", entries)
	}
}
