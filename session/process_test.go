package session

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
)

// These tests run real second processes: the test binary re-executed with
// helperEnv naming a helper, which runs instead of the tests.
const helperEnv = "BONSAI_SESSION_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "writer":
		os.Exit(report(writerHelper()))
	case "streamer":
		os.Exit(report(streamerHelper()))
	case "adder":
		os.Exit(report(adderHelper()))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

func report(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func helperCommand(t *testing.T, helper string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+helper)
	cmd.Stderr = os.Stderr
	return cmd
}

// adderSession names the session adderHelper continues.
const adderSession = "BONSAI_ADDER_SESSION"

// adderHelper is another bonsai continuing a session: it adds one turn.
func adderHelper() error {
	s, err := OpenWith(os.Getenv(writerDB), Options{BusyTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	id, err := strconv.ParseInt(os.Getenv(adderSession), 10, 64)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := s.Add(ctx, id, Message{Role: chat.RoleUser, Content: "A's question"}); err != nil {
		return err
	}
	_, err = s.Add(ctx, id, Message{Role: chat.RoleAssistant, Content: "A's reply"})
	return err
}

const (
	writerSessions = 25
	writerTag      = "BONSAI_WRITER_TAG"
	writerDB       = "BONSAI_WRITER_DB"
)

// writerHelper writes writerSessions sessions of a user prompt and a streamed
// reply each, tagged so the parent can tell the processes apart.
func writerHelper() error {
	s, err := OpenWith(os.Getenv(writerDB), Options{BusyTimeout: 30 * time.Second, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	tag := os.Getenv(writerTag)
	for i := range writerSessions {
		in, err := s.Create(ctx, Meta{Model: tag})
		if err != nil {
			return err
		}
		if _, err := s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: fmt.Sprintf("%s question %d", tag, i)}); err != nil {
			return err
		}
		w, err := s.BeginReply(ctx, in.ID, Meta{Model: tag})
		if err != nil {
			return err
		}
		for j := range 20 {
			w.Append(fmt.Sprintf("%s-%d-%d ", tag, i, j), "")
			if j%5 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if err := w.Finish(Stats{GenTokens: 20}, false); err != nil {
			return err
		}
	}
	return nil
}

func expectedReply(tag string, i int) string {
	var b strings.Builder
	for j := range 20 {
		fmt.Fprintf(&b, "%s-%d-%d ", tag, i, j)
	}
	return b.String()
}

// Two processes creating the same new database and writing to it at once
// lose nothing.
func TestTwoProcessesWriteConcurrently(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "shared.db")
	tags := []string{"alpha", "beta"}
	var cmds []*exec.Cmd
	for _, tag := range tags {
		cmd := helperCommand(t, "writer")
		cmd.Env = append(cmd.Env, writerTag+"="+tag, writerDB+"="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %s: %v", tags[i], err)
		}
	}

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(tags)*writerSessions {
		t.Fatalf("%d sessions, want %d", len(list), len(tags)*writerSessions)
	}
	seen := map[string]bool{}
	for _, in := range list {
		sess, err := s.Load(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(sess.Turns) != 2 {
			t.Fatalf("session %d has %d turns", in.ID, len(sess.Turns))
		}
		var tag string
		var i int
		if _, err := fmt.Sscanf(sess.Turns[0].Content, "%s question %d", &tag, &i); err != nil {
			t.Fatalf("session %d prompt %q: %v", in.ID, sess.Turns[0].Content, err)
		}
		reply := sess.Turns[1]
		if reply.Content != expectedReply(tag, i) || reply.Interrupted || reply.Model != tag || in.Title != sess.Turns[0].Content {
			t.Fatalf("session %d: reply %+v, title %q", in.ID, reply, in.Title)
		}
		key := fmt.Sprint(tag, i)
		if seen[key] {
			t.Fatalf("%s written twice", key)
		}
		seen[key] = true
	}
	hits, err := s.Search(ctx, "question", SearchOptions{Limit: 1000})
	if err != nil || len(hits) != len(tags)*writerSessions {
		t.Fatalf("search found %d prompts, %v; want %d", len(hits), err, len(tags)*writerSessions)
	}
}

// streamerHelper stores one complete exchange, then streams a reply forever,
// printing each appended word's index after appending it.
func streamerHelper() error {
	s, err := Open(os.Getenv(writerDB)) // the default one-second flush
	if err != nil {
		return err
	}
	ctx := context.Background()
	in, err := s.Create(ctx, Meta{})
	if err != nil {
		return err
	}
	if _, err := s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: "first question"}); err != nil {
		return err
	}
	w, err := s.BeginReply(ctx, in.ID, Meta{})
	if err != nil {
		return err
	}
	w.Append("first answer", "first thoughts")
	if err := w.Finish(Stats{GenTokens: 2}, false); err != nil {
		return err
	}
	if _, err := s.Add(ctx, in.ID, Message{Role: chat.RoleUser, Content: "second question"}); err != nil {
		return err
	}
	w, err = s.BeginReply(ctx, in.ID, Meta{})
	if err != nil {
		return err
	}
	fmt.Printf("session %d\n", in.ID)
	for i := 0; ; i++ {
		w.Append(fmt.Sprintf("w%d ", i), "")
		fmt.Println(i)
		time.Sleep(5 * time.Millisecond)
	}
}

// A process killed with SIGKILL while streaming keeps every completed
// message and all but about the last second of the reply.
func TestSIGKILLWhileStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	if runtime.GOOS == "windows" {
		t.Skip("no SIGKILL")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := helperCommand(t, "streamer")
	cmd.Env = append(cmd.Env, writerDB+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// Record when each word's index arrives: it was appended before that.
	type arrival struct {
		index int
		at    time.Time
	}
	var (
		mu        sync.Mutex
		arrivals  []arrival
		sessionID int64
	)
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			now := time.Now()
			mu.Lock()
			if rest, ok := strings.CutPrefix(line, "session "); ok {
				sessionID, _ = strconv.ParseInt(rest, 10, 64)
			} else if i, err := strconv.Atoi(line); err == nil {
				arrivals = append(arrivals, arrival{i, now})
			}
			mu.Unlock()
		}
	}()

	// Stream for three seconds after the first word, then kill.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		started := len(arrivals) > 0 && time.Since(arrivals[0].at) > 3*time.Second
		mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("helper did not stream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	killedAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	<-scanDone

	// Everything appended more than a second (plus scheduling slack on a
	// busy machine) before the kill must be stored.
	const slack = 500 * time.Millisecond
	mustHave := -1
	for _, a := range arrivals {
		if a.at.Before(killedAt.Add(-time.Second - slack)) {
			mustHave = a.index
		}
	}
	if mustHave < 0 {
		t.Fatal("no word was appended long enough before the kill")
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer s.Close()
	sess, err := s.Load(context.Background(), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.Turns) != 4 {
		t.Fatalf("%d turns after crash, want 4: %+v", len(sess.Turns), sess.Turns)
	}
	want := []Message{
		{Role: chat.RoleUser, Content: "first question"},
		{Role: chat.RoleAssistant, Content: "first answer", Thinking: "first thoughts", Stats: Stats{GenTokens: 2}},
		{Role: chat.RoleUser, Content: "second question"},
	}
	for i, w := range want {
		got := sess.Turns[i]
		w.ID, w.Created = got.ID, got.Created
		if got != w {
			t.Errorf("turn %d = %+v, want %+v", i, got, w)
		}
	}
	partial := sess.Turns[3]
	if !partial.Interrupted {
		t.Error("the streaming reply is not marked interrupted")
	}
	words := strings.Fields(partial.Content)
	for i, w := range words {
		if w != fmt.Sprintf("w%d", i) {
			t.Fatalf("stored reply is not a prefix of what was streamed: word %d is %q", i, w)
		}
	}
	last := arrivals[len(arrivals)-1].index
	if len(words) <= mustHave {
		t.Fatalf("stored %d words; words up to w%d were appended over %v before the kill (last appended: w%d)",
			len(words), mustHave, time.Second+slack, last)
	}
	t.Logf("streamed %d words, stored %d, required %d", last+1, len(words), mustHave+1)
}
