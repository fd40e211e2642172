package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
)

// countingEngine is the fake with a tokenizer: a token per word, and two
// for the template around a message.
type countingEngine struct{ *fakeengine.Engine }

func (c countingEngine) fake() *fakeengine.Engine { return c.Engine }

func (countingEngine) CountTokens(msgs []chat.Message, _ bool) (int, error) {
	n := 0
	for _, m := range msgs {
		n += 2 + len(strings.Fields(m.Content))
	}
	return n, nil
}

// deliver runs an attachment's or a completion's command through Update,
// and the attachment a completion asks for next; never a note's timer.
func deliver(m *Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	switch msg := cmd().(type) {
	case attachedMsg:
		m.Update(msg)
	case pathCompletedMsg:
		_, next := m.Update(msg)
		deliver(m, next)
	case tea.BatchMsg:
		for _, c := range msg {
			deliver(m, c)
		}
	}
}

// A file attached with /file or @path goes with the next message, its size
// in tokens shown before; one that cannot fit, is binary, is a directory
// or cannot be read is refused with why.
func TestAttachFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notes := write("notes.txt", []byte("the pine grows slowly\n"))
	binary := write("image.png", []byte("\x89PNG\r\n\x1a\n\x00\x00"))
	huge := write("huge.txt", []byte(strings.Repeat("word ", 4000)))
	fe := countingEngine{fakeengine.New(fakeengine.Options{})}
	m, _, _ := newTestModel(t, Options{Engine: fe}, 120, 30)
	loaded(t, m, fe.Engine)

	for _, tc := range []struct{ path, why string }{
		{binary, "not a text file"},
		{huge, "too big for the context: 4004 tokens"},
		{dir, "a directory"},
		{filepath.Join(dir, "missing.txt"), "no such file"},
	} {
		deliver(m, m.fileCommand(tc.path))
		if bar := statusBar(m); !strings.Contains(bar, "not attached") || !strings.Contains(bar, tc.why) {
			t.Errorf("%s: status %q, want it refused as %q", filepath.Base(tc.path), bar, tc.why)
		}
	}
	if len(m.attachments) != 0 {
		t.Fatalf("refused files were attached: %+v", m.attachments)
	}
	deliver(m, m.fileCommand(notes))
	contains(t, m.View(), "attached notes.txt (8 tokens)")
	sendAndWait(t, m, fe.Engine, "what grows?")
	got := fe.Requests()[0].Messages
	if last := got[len(got)-1].Content; !strings.HasPrefix(last, "what grows?\n\nFile notes.txt:\n```\nthe pine grows slowly\n```") {
		t.Fatalf("message sent: %q", last)
	}
	if h := plain(m.hintLine()); len(m.attachments) != 0 || strings.Contains(h, "notes.txt") {
		t.Errorf("still attached after sending: %d, hint %q", len(m.attachments), h)
	}

	// @path: completed by tab (and attached), or read when sent.
	m.input.SetValue("read @" + filepath.Join(dir, "no"))
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyTab})
	deliver(m, cmd)
	if m.input.Value() != "read @"+notes || len(m.attachments) != 1 {
		t.Fatalf("tab on @path: input %q, %d attached", m.input.Value(), len(m.attachments))
	}
	m.attachments = nil
	m.input.SetValue("and @" + notes + " please, @nobody")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	deliver(m, cmd)
	idle(t, m, fe.Engine)
	reqs := fe.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests after sending a message with @path, want 2", len(reqs))
	}
	msgs := reqs[1].Messages
	if last := msgs[len(msgs)-1].Content; !strings.Contains(last, "File notes.txt:") || !strings.HasPrefix(last, "and @") {
		t.Errorf("message with @path sent as %q", last)
	}
	m.input.SetValue("see @" + binary)
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	deliver(m, cmd)
	if len(fe.Requests()) != 2 || m.input.Value() != "see @"+binary {
		t.Errorf("a message naming a binary file was sent (input now %q)", m.input.Value())
	}
	contains(t, m.View(), "not a text file")
}
