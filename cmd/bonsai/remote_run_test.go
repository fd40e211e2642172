package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A hostile server's escape sequences: the terminal title, the clipboard
// through OSC 52 (twice), a screen clear.
const (
	setTitle    = "\x1b]0;pwned\x07"
	toClipboard = "\x1b]52;c;cm0gLXJmIH4K\x07"
	clearScreen = "\x1b[2J\x1b[H"
)

// hostileServer streams a reply whose text and reasoning carry escape
// sequences, or, for a prompt naming a failure, fails with them.
func hostileServer(t *testing.T) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			io.WriteString(w, `{"data":[{"id":"evil`+jsonEsc(setTitle)+`"}]}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), "status"):
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "overloaded"+setTitle+clearScreen)
			return
		case strings.Contains(string(body), "badjson"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {"+setTitle+"\n\n")
			return
		case strings.Contains(string(body), "chunk"):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"error":{"message":"boom`+jsonEsc(toClipboard)+`"}}`+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"choices":[{"index":0,"delta":{"reasoning_content":"thinking` + jsonEsc(setTitle) + `"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hello` + jsonEsc(toClipboard+toClipboard) + `"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":" world` + jsonEsc(clearScreen) + `"},"finish_reason":"stop"}]}`,
			`[DONE]`,
		} {
			io.WriteString(w, "data: "+d+"\n\n")
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

// jsonEsc spells control characters as JSON escapes.
func jsonEsc(s string) string {
	return strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`).Replace(s)
}

func hasControl(s string) bool { return strings.ContainsAny(s, "\x1b\x07") }

// Everything a remote server says reaches a terminal through the printable
// filter: the reply, the reasoning and the errors; a pipe gets the reply
// exactly.
func TestRunRemoteFiltersTheServer(t *testing.T) {
	isolatedXDG(t)
	hs := hostileServer(t)
	saved := isTerminalWriter
	defer func() { isTerminalWriter = saved }()
	isTerminalWriter = func(io.Writer) bool { return true }

	out, errOut, code := run(t, "run", "--remote", hs.URL+"/v1", "--think", "hi")
	if code != 0 || hasControl(out) || hasControl(errOut) {
		t.Errorf("exit %d, stdout %q, stderr %q: control characters reached the terminal", code, out, errOut)
	}
	if !strings.Contains(out, "Hello␛]52;c;") || !strings.Contains(errOut, "thinking␛]0;pwned") {
		t.Errorf("stdout %q, stderr %q: want the text with ESC shown", out, errOut)
	}
	for _, prompt := range []string{"status", "badjson", "chunk"} {
		_, errOut, code := run(t, "run", "--remote", hs.URL+"/v1", prompt)
		if code != 1 || hasControl(errOut) || !strings.Contains(errOut, "␛") {
			t.Errorf("%s: exit %d, stderr %q", prompt, code, errOut)
		}
	}

	isTerminalWriter = func(io.Writer) bool { return false }
	if out, _, _ := run(t, "run", "--remote", hs.URL+"/v1", "hi"); !strings.Contains(out, "Hello"+toClipboard+toClipboard) {
		t.Errorf("a pipe got %q, want the reply exactly", out)
	}
}

// Without --think the server's reasoning is not printed at all.
func TestRunRemoteReasoningOnlyWithThink(t *testing.T) {
	isolatedXDG(t)
	hs := hostileServer(t)
	out, errOut, code := run(t, "run", "--remote", hs.URL+"/v1", "hi")
	if code != 0 || strings.Contains(errOut, "thinking") || strings.Contains(out, "thinking") || !strings.Contains(out, "Hello") {
		t.Errorf("exit %d, stdout %q, stderr %q: want the reply alone", code, out, errOut)
	}
	if _, errOut, _ := run(t, "run", "--remote", hs.URL+"/v1", "--think", "hi"); !strings.Contains(errOut, "thinking") {
		t.Errorf("--think: stderr %q, want the reasoning", errOut)
	}
}

// A server's HTTP reason phrase is filtered in pull's error.
func TestPullFiltersTheReasonPhrase(t *testing.T) {
	isolatedXDG(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bufio.NewReader(c).ReadString('\n')
			io.WriteString(c, "HTTP/1.1 404 Not Found"+setTitle+clearScreen+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			c.Close()
		}
	}()
	_, errOut, code := run(t, "pull", "--dir", t.TempDir(), "http://"+ln.Addr().String()+"/m.gguf")
	if code != 1 || hasControl(errOut) || !strings.Contains(errOut, "Not Found␛]0;pwned") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
