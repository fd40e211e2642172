package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Sizes that used to crash the process (a fatal out-of-memory, a makeslice
// panic) or print nonsense are refused with what they would need.
func TestSizesAreRefusedNotCrashed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in stderr, or stdout for info
		code int
	}{
		{[]string{"run", "--backend", "cpu", "--ctx", "100000000", "hi"}, []string{"100000000 tokens", "trained on 1024", "GiB", "at most 16777216"}, 1},
		// Beyond the training but within reach: it runs, and says so.
		{[]string{"run", "--backend", "cpu", "--ctx", "2048", "--max-tokens", "2", "hi"}, []string{"beyond the 1024 this model was trained on"}, 0},
		// The configuration refuses what no model has, as the chat's does.
		{[]string{"run", "--backend", "cpu", "--ctx", "9223372036854775807", "hi"}, []string{"flag --ctx", "must be between 16 and 1073741824"}, 2},
		{[]string{"run", "--backend", "auto", "--ctx", "100000000", "hi"}, []string{"trained on 1024"}, 1},
		{[]string{"run", "--backend", "cpu", "--threads", "9999999999999", "hi"}, []string{"flag --threads", "9999999999999", "must be between 0 and"}, 2},
		{[]string{"info", "--ctx", "9223372036854775807"}, []string{"24.0 ZiB KV cache", "beyond the 1024"}, 0},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := run(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output does not mention %q:\n%s%s", w, out, errOut)
				}
			}
			if strings.Contains(out, "-1024 B") {
				t.Errorf("a wrapped-around size in %q", out)
			}
		})
	}
}

// `bonsai info` and `run` on a FIFO refuse it at once instead of hanging.
func TestModelPathMustBeARegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, args := range [][]string{{"info", path}, {"run", "--model", path, "hi"}, {"tokenize", "--model", path, "hi"}} {
		done := make(chan string, 1)
		go func() {
			_, errOut, code := run(t, args...)
			done <- fmt.Sprint(code, " ", errOut)
		}()
		select {
		case got := <-done:
			if !strings.HasPrefix(got, "1 ") || !strings.Contains(got, "named pipe") {
				t.Errorf("%v: %s", args, got)
			}
		case <-time.After(10 * time.Second):
			if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			t.Fatalf("%v hung on a FIFO", args)
		}
	}
}
