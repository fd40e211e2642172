package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/session"
	"golang.org/x/sys/unix"
)

// bonsaiBinary builds ./cmd/bonsai once per test run, for the tests that
// send signals to a real process.
var bonsaiBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "bonsai-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bonsai")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// openPTY returns a pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pts: %v", err)
	}
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 100})
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// screen collects what the child draws.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) has(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Contains(s.buf.Bytes(), []byte(text))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A real chat process on a pseudo-terminal, ended by each signal that
// ends sessions (the terminal closing, a kill, a Ctrl+C from outside)
// while a reply streams: the prompt is in state.json as soon as it is
// entered, and the reply is stored with what it had, its token count, and
// marked interrupted (or complete, if it ended first), never lost.
func TestSignalsKeepTheConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := bonsaiBinary()
	if err != nil {
		t.Fatal(err)
	}
	// Random weights: the reply streams until the context fills, so the
	// signal surely comes while it streams.
	model := filepath.Join(t.TempDir(), "synth.gguf")
	if out, err := exec.Command(bin, "synth", "--shape", "tiny", "--type", "q1_0", "-o", model).CombinedOutput(); err != nil {
		t.Fatalf("synth: %v %s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			home := t.TempDir()
			master, slave := openPTY(t)
			cmd := exec.Command(bin, "--backend", "cpu", "--model", model)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.Env = append(os.Environ(), "TERM=xterm-256color", "BONSAI_THEME=dark", "BONSAI_CONFIG_DIR="+filepath.Join(home, "cfg"),
				"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_STATE_HOME="+filepath.Join(home, "state"),
				"XDG_CONFIG_HOME="+filepath.Join(home, "config"))
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			var scr screen
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					scr.Write(buf[:n])
					if err != nil {
						return
					}
				}
			}()
			waitFor(t, "the model to load", func() bool { return scr.has("ready") })
			master.Write([]byte("Recite the first chapter of Genesis, every verse\r"))
			statePath := filepath.Join(home, "state", "bonsai", "state.json")
			waitFor(t, "the prompt in state.json", func() bool {
				data, _ := os.ReadFile(statePath)
				return bytes.Contains(data, []byte("first chapter of Genesis"))
			})
			waitFor(t, "the reply to start", func() bool { return scr.has("generating") })
			time.Sleep(700 * time.Millisecond) // some tokens, not all
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				t.Fatalf("still running 15s after %v", sig)
			}

			store, err := session.Open(filepath.Join(home, "data", "bonsai", "bonsai.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			sess, err := store.Last(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(sess.Turns) != 2 || !strings.Contains(sess.Turns[0].Content, "Genesis") {
				t.Fatalf("stored turns %+v", sess.Turns)
			}
			r := sess.Turns[1]
			if r.Content == "" || r.Stats.GenTokens == 0 {
				t.Errorf("reply stored with %d bytes and gen_tokens %d", len(r.Content), r.Stats.GenTokens)
			}
			if r.Stopped || !r.Interrupted {
				t.Errorf("a reply cut by %v: stopped=%v interrupted=%v, want interrupted", sig, r.Stopped, r.Interrupted)
			}
			// Everything streamed before the signal is there, not the text
			// of the last flush a second earlier: about one token per
			// 4 bytes at least.
			if r.Stats.GenTokens < 20 || len(r.Content) < r.Stats.GenTokens {
				t.Errorf("reply stored with %d tokens in %d bytes", r.Stats.GenTokens, len(r.Content))
			}
		})
	}
}

// `bonsai pull` killed with SIGTERM while the server stalls stops through
// its context: no empty .partial is left for `bonsai models` to list, and a
// partial with bytes in it stays for the next pull to resume.
func TestPullStopsCleanlyOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := bonsaiBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, sent := range []int{0, 100} {
		t.Run(fmt.Sprintf("%d bytes sent", sent), func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "1000")
				w.Header().Set("ETag", `"v1"`)
				w.WriteHeader(http.StatusOK)
				w.Write(bytes.Repeat([]byte{'G'}, sent))
				w.(http.Flusher).Flush()
				select { // stall
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)
			dir := t.TempDir()
			cmd := exec.Command(bin, "pull", "--dir", dir, srv.URL+"/m.gguf")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			partial := filepath.Join(dir, "m.gguf.partial")
			waitFor(t, "the download to start", func() bool {
				st, err := os.Stat(partial)
				return err == nil && st.Size() == int64(sent)
			})
			time.Sleep(200 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				t.Fatal("pull still running 15s after SIGTERM")
			}
			st, err := os.Stat(partial)
			switch {
			case sent == 0 && err == nil:
				t.Errorf("an empty partial file was left (%d bytes)", st.Size())
			case sent > 0 && (err != nil || st.Size() != int64(sent)):
				t.Errorf("the partial file with %d bytes was not kept: %v", sent, err)
			}
			out, _ := exec.Command(bin, "models", "--dir", dir).CombinedOutput()
			if sent == 0 && strings.Contains(string(out), "m.gguf") {
				t.Errorf("models lists the empty download:\n%s", out)
			}
		})
	}
}
