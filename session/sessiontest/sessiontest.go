// Package sessiontest helps tests of code that reads the session store.
package sessiontest

import (
	"os"
	"os/exec"
	"testing"
)

// ReadOnlyDir makes dir unwritable for this process until the test ends.
// Root writes through permission bits, so for root dir becomes a read-only
// bind mount of itself (the test is skipped where mounting is not allowed).
func ReadOnlyDir(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("mount", "--bind", "-o", "ro", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}
