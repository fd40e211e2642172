package main

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM drains: a reply streaming when the signal comes runs to its end
// ([DONE]), then the server stops and exits cleanly.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := bonsaiBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--port", "0", "--threads", "2", "--parallel", "2", "--ctx", "512", "--api-key", "k")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	var addr string
	listen := regexp.MustCompile(`listening on (http://\S+)`)
	timeout := time.After(60 * time.Second)
	for ready := false; !ready; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the server exited before it was ready")
			}
			if m := listen.FindStringSubmatch(line); m != nil {
				addr = m[1]
			}
			ready = addr != "" && strings.Contains(line, "ready")
		case <-timeout:
			t.Fatal("the server did not get ready")
		}
	}
	req, _ := http.NewRequest(http.MethodPost, addr+"/v1/completions",
		strings.NewReader(`{"prompt":"Once","max_tokens":120,"stream":true,"ignore_eos":true}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil { // the first chunk: generating
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || !strings.Contains(string(rest), `"finish_reason":"length"`) {
		t.Fatalf("the stream after SIGTERM: %v\n%s", err, rest)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit after draining")
	}
}

// --cors takes origins (or *); anything else is a usage error, said
// before the server starts.
func TestServeCORSFlag(t *testing.T) {
	for _, bad := range []string{"app.example", "ftp://app.example", "https://app.example/chat", "https://"} {
		if _, errOut, code := run(t, "serve", "--port", "0", "--cors", bad); code != 2 || !strings.Contains(errOut, "--cors takes origins") {
			t.Errorf("--cors %q: exit %d, %s", bad, code, errOut)
		}
	}
	// The configuration's serve.cors (here BONSAI_CORS) is read the same
	// way; the flag, given, overrides it.
	isolatedXDG(t)
	t.Setenv("BONSAI_CORS", "app.example")
	if _, errOut, code := run(t, "serve", "--port", "0"); code != 2 || !strings.Contains(errOut, "takes origins") {
		t.Errorf("BONSAI_CORS=app.example: exit %d, %s", code, errOut)
	}
	if _, errOut, code := run(t, "serve", "--port", "0", "--cors", "ftp://x"); code != 2 || !strings.Contains(errOut, `"ftp://x"`) {
		t.Errorf("--cors over BONSAI_CORS: exit %d, %s", code, errOut)
	}
	got, err := corsOrigins(" https://app.example/ ,http://localhost:5173,*")
	if want := []string{"https://app.example", "http://localhost:5173", "*"}; err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("corsOrigins: %q, %v", got, err)
	}
}
