package tui

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
)

func openStore(t *testing.T) *session.Store {
	t.Helper()
	s, err := session.Open(filepath.Join(t.TempDir(), "bonsai.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// turns is a stored session in a compact form: "role:content" per message.
func turns(s *session.Session) []string {
	var out []string
	for _, m := range s.Turns {
		out = append(out, m.Role+":"+m.Content)
	}
	return out
}

// settle delivers the background writer's results to the model, as the
// program would, until none arrives for a while.
func settle(m *Model) {
	for {
		select {
		case msg := <-m.bg.out:
			m.Update(msg)
		case <-time.After(300 * time.Millisecond):
			return
		}
	}
}

func sendAndWait(t *testing.T, m *Model, fe *fakeengine.Engine, text string) {
	t.Helper()
	typeText(m, text)
	press(m, tea.KeyEnter)
	idle(t, m, fe)
}

func TestEveryMessageIsSaved(t *testing.T) {
	store := openStore(t)
	m, fe, _ := newTestModel(t, Options{Store: store, System: "Be kind."}, 80, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "first question")
	sendAndWait(t, m, fe, "second question")
	settle(m)
	m.Close()
	sess, err := store.Last(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"system:Be kind.", "user:first question", "assistant:Reply 1 to: first question",
		"user:second question", "assistant:Reply 2 to: second question"}
	if got := turns(sess); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stored %q\nwant %q", got, want)
	}
	if sess.Title != "first question" || m.title != "first question" {
		t.Errorf("title %q, shown %q", sess.Title, m.title)
	}
	if m.sessionID != sess.ID {
		t.Errorf("chat shows session %d, stored as %d", m.sessionID, sess.ID)
	}
	if r := sess.Turns[2]; r.Stats.GenTokens == 0 || r.Variant != fakeengine.DefaultInfo.Variant || r.Backend != "cpu" {
		t.Errorf("reply stored without stats or meta: %+v", r)
	}
}

func TestStoppedReplyIsSavedAsStopped(t *testing.T) {
	store := openStore(t)
	fe := fakeengine.New(fakeengine.Options{TokenDelay: 5 * time.Millisecond,
		Replies: []fakeengine.Reply{{Content: strings.Repeat("word ", 300)}}})
	m, _, _ := newTestModel(t, Options{Store: store, Engine: fe}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "go on")
	press(m, tea.KeyEnter)
	pump(t, m, fe, func() bool { return strings.Contains(m.conv.entries[len(m.conv.entries)-1].content, "word word") })
	press(m, tea.KeyEsc)
	idle(t, m, fe)
	m.Close()
	sess, err := store.Last(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := sess.Turns[len(sess.Turns)-1]
	if !r.Stopped || r.Interrupted || r.Content != m.conv.entries[len(m.conv.entries)-1].content {
		t.Errorf("stored reply stopped=%v interrupted=%v %d bytes (shown %d)", r.Stopped, r.Interrupted,
			len(r.Content), len(m.conv.entries[len(m.conv.entries)-1].content))
	}
}

func TestRegenerateAndEditKeepStoreInStep(t *testing.T) {
	store := openStore(t)
	m, fe, _ := newTestModel(t, Options{Store: store, System: "sys"}, 80, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "one")
	sendAndWait(t, m, fe, "two")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	idle(t, m, fe)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	typeText(m, " edited")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	m.Close()
	sess, err := store.Last(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, msg := range m.conv.Messages() {
		shown = append(shown, msg.Role+":"+msg.Content)
	}
	if got := turns(sess); strings.Join(got, "|") != strings.Join(shown, "|") {
		t.Errorf("stored %q\nshown  %q", got, shown)
	}
	if shown[len(shown)-2] != "user:two edited" {
		t.Errorf("transcript %q", shown)
	}
}

func TestResumeContinuesTheSameSession(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	info, err := store.Create(ctx, session.Meta{Model: "m.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []chat.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "earlier answer", Thinking: "hmm"}} {
		if _, err := store.Add(ctx, info.ID, session.Message{Role: msg.Role, Content: msg.Content, Thinking: msg.Thinking}); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := store.Load(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	m, fe, _ := newTestModel(t, Options{Store: store, Resume: sess}, 80, 24)
	loaded(t, m, fe)
	contains(t, m.View(), "earlier answer")
	contains(t, m.View(), "earlier")
	sendAndWait(t, m, fe, "now")
	if msgs := fe.Requests()[0].Messages; len(msgs) != 3 || msgs[1].Thinking != "hmm" {
		t.Errorf("request after resume %+v", msgs)
	}
	if id := fe.Requests()[0].Session; id != info.ID {
		t.Errorf("the request after resume names session %d, want %d (the engine's saved state is per session)", id, info.ID)
	}
	m.Close()
	again, err := store.Load(ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(again.Turns); n != 4 {
		t.Errorf("resumed session has %d messages, want 4: %q", n, turns(again))
	}
}

// run executes a command and feeds its message back, the way bubbletea
// would, skipping timers.
func run(m *Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	if msg := runCmd(cmd); msg != nil {
		_, next := m.Update(msg)
		if _, isList := msg.(sessionChangedMsg); isList {
			run(m, next)
		}
	}
}

func TestSessionList(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	for _, title := range []string{"alpha chat", "beta chat", "gamma chat"} {
		info, err := store.Create(ctx, session.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Add(ctx, info.ID, session.Message{Role: "user", Content: title}); err != nil {
			t.Fatal(err)
		}
	}
	m, fe, _ := newTestModel(t, Options{Store: store}, 90, 30)
	loaded(t, m, fe)
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	run(m, cmd)
	v := m.View()
	for _, title := range []string{"alpha chat", "beta chat", "gamma chat"} {
		contains(t, v, title)
	}
	typeText(m, "bet")
	v = m.View()
	contains(t, v, "beta chat")
	lacks(t, v, "alpha chat")
	// Rename the selected (filtered) session.
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	for i := 0; i < len("beta chat"); i++ {
		press(m, tea.KeyBackspace)
	}
	typeText(m, "renamed")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	press(m, tea.KeyEsc) // clear the filter
	contains(t, m.View(), "renamed")
	// Delete the first one listed (the most recent: gamma), with confirmation.
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	contains(t, m.View(), "y / n")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'y'}})
	run(m, cmd)
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, in := range list {
		titles = append(titles, in.Title)
	}
	if strings.Join(titles, ",") != "renamed,alpha chat" && strings.Join(titles, ",") != "alpha chat,renamed" {
		t.Errorf("sessions after rename and delete: %q", titles)
	}
	// Open one.
	m.sessions.cursor = 0
	target := m.sessions.visible()[0]
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	if m.overlay != overlayNone {
		t.Fatal("the list stayed open after opening a session")
	}
	contains(t, m.View(), target.Title)
	if fe.Resets() == 0 {
		t.Error("opening a session did not reset the KV cache")
	}
}

func TestSessionsWithoutStore(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 80, 24)
	loaded(t, m, fe)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	contains(t, m.View(), "not being saved")
}

func TestSessionSearchByContent(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	for _, msgs := range [][]string{{"alpha chat", "the zebra is striped"}, {"beta chat", "nothing here"}} {
		info, err := store.Create(ctx, session.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range msgs {
			role := "user"
			if i == 1 {
				role = "assistant"
			}
			if _, err := store.Add(ctx, info.ID, session.Message{Role: role, Content: text}); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, fe, _ := newTestModel(t, Options{Store: store}, 90, 30)
	loaded(t, m, fe)
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	run(m, cmd)
	var last tea.Cmd
	for _, r := range "zebr" {
		_, last = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	run(m, last)
	v := m.View()
	contains(t, v, "alpha chat")
	contains(t, v, "zebra is striped")
	lacks(t, v, "beta chat")
}

func TestSessionListFixes(t *testing.T) {
	store := openStore(t)
	ctx := context.Background()
	long := strings.Repeat("a very long title ", 12)
	for _, msgs := range [][]string{{"zebra facts", "none"}, {"alpha chat", "the zebra is striped"}, {long, "x"}} {
		info, err := store.Create(ctx, session.Meta{})
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range msgs {
			role := map[bool]string{true: "user", false: "assistant"}[i == 0]
			if _, err := store.Add(ctx, info.ID, session.Message{Role: role, Content: text}); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, fe, _ := newTestModel(t, Options{Store: store}, 90, 30)
	loaded(t, m, fe)
	m.status.stats, m.status.hasStats = engine.Stats{ContextUsed: 777, ContextSize: 4096}, true
	open := func() {
		t.Helper()
		_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
		run(m, cmd)
	}
	search := func(q string) {
		t.Helper()
		var last tea.Cmd
		for _, r := range q {
			_, last = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
		}
		run(m, last)
	}
	open()
	search("zebra")
	// A title match outranks a chat that only said it, though older.
	if v := m.sessions.visible(); len(v) != 2 || v[0].Title != "zebra facts" {
		t.Errorf("search order %+v, want the title match first", v)
	}
	search("qqq")
	contains(t, m.View(), `no saved chat matches "zebraqqq"`)
	// Reopened, the list starts over.
	press(m, tea.KeyEsc)
	press(m, tea.KeyEsc)
	if m.overlay != overlayNone {
		t.Fatal("esc did not close the list")
	}
	open()
	if m.sessions.filter != "" || len(m.sessions.visible()) != 3 {
		t.Errorf("reopened with filter %q and %d chats", m.sessions.filter, len(m.sessions.visible()))
	}
	// Renaming a long title keeps the cursor in view.
	m.sessions.cursor = 0 // the most recent: the long one
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	typeText(m, "!")
	contains(t, m.View(), "!▏")
	press(m, tea.KeyEsc)
	// Opening a chat shows its own context, not the last one's numbers.
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	if m.overlay != overlayNone {
		t.Fatal("the chat did not open")
	}
	lacks(t, m.View(), "ctx 777/")
}

// An edit (ctrl+x) leaves the stored session alone until the edited prompt
// is sent; esc puts the turn back, and quitting meanwhile loses nothing.
func TestEditChangesTheStoreOnlyWhenSent(t *testing.T) {
	store := openStore(t)
	m, fe, _ := newTestModel(t, Options{Store: store}, 80, 24)
	loaded(t, m, fe)
	sendAndWait(t, m, fe, "one")
	sendAndWait(t, m, fe, "two")
	settle(m)
	stored := func() []string {
		t.Helper()
		settle(m)
		sess, err := store.Load(context.Background(), m.sessionID)
		if err != nil {
			t.Fatal(err)
		}
		return turns(sess)
	}
	all := []string{"user:one", "assistant:Reply 1 to: one", "user:two", "assistant:Reply 2 to: two"}
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	if got := stored(); !slices.Equal(got, all) {
		t.Fatalf("stored while editing: %q, want the whole chat", got)
	}
	press(m, tea.KeyEsc)
	contains(t, m.View(), "Reply 2 to: two")
	if m.input.Value() != "" || len(m.conv.Messages()) != 4 {
		t.Fatalf("esc left input %q and %d messages", m.input.Value(), len(m.conv.Messages()))
	}
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	typeText(m, "!")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	want := []string{"user:one", "assistant:Reply 1 to: one", "user:two!", "assistant:Reply 3 to: two!"}
	if got := stored(); !slices.Equal(got, want) {
		t.Fatalf("stored after sending the edit: %q, want %q", got, want)
	}
}
