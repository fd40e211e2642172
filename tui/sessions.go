package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// listMode is what the session list's keys do.
type listMode int

const (
	listBrowse listMode = iota
	listRename
	listConfirmDelete
)

// sessionList is the saved-chats overlay: filter by typing, open, rename,
// delete.
type sessionList struct {
	items   []session.Info
	cursor  int
	filter  string
	mode    listMode
	edit    string // the new title while renaming
	err     string
	loading bool
	current int64 // the session open in the chat
	// hits are sessions whose messages match the filter (full-text
	// search), with a snippet of the best match.
	hits map[int64]string
}

// visible is the filtered list.
func (l *sessionList) visible() []session.Info {
	if l.filter == "" {
		return l.items
	}
	f := strings.ToLower(l.filter)
	// Title (or id) matches first, then chats that only said it; each
	// group keeps the list's order (most recent first).
	var titled, said []session.Info
	for _, it := range l.items {
		_, hit := l.hits[it.ID]
		switch {
		case strings.Contains(strings.ToLower(it.Title), f) || strings.Contains(fmt.Sprint(it.ID), f):
			titled = append(titled, it)
		case hit:
			said = append(said, it)
		}
	}
	return append(titled, said...)
}

func (l *sessionList) selected() (session.Info, bool) {
	v := l.visible()
	if l.cursor < 0 || l.cursor >= len(v) {
		return session.Info{}, false
	}
	return v[l.cursor], true
}

func (l *sessionList) View(st *Styles, width, height int) string {
	inner := max(width-6, 20)
	var b strings.Builder
	b.WriteString(st.PanelHead.Render("Saved chats"))
	b.WriteString(st.Dim.Render("  enter open · ctrl+r rename · ctrl+x delete · esc") + "\n")
	b.WriteString(st.Dim.Render("search titles and messages: ") + l.filter + "▏\n")
	switch {
	case l.loading:
		b.WriteString(st.Dim.Render("loading…"))
	case l.err != "":
		b.WriteString(st.Error.Width(inner).Render(l.err))
	default:
		v := l.visible()
		switch {
		case len(v) == 0 && l.filter != "":
			b.WriteString(st.Dim.Render(fmt.Sprintf("no saved chat matches %q (backspace edits, esc closes)", l.filter)))
		case len(v) == 0:
			b.WriteString(st.Dim.Render("no saved chats"))
		}
		rows := max(height-5, 3)
		first := 0
		if l.cursor >= rows {
			first = l.cursor - rows + 1
		}
		for i := first; i < len(v) && i < first+rows; i++ {
			it := v[i]
			title := printable(strings.Join(strings.Fields(it.Title), " "))
			if title == "" {
				title = "(untitled)"
			}
			renaming := i == l.cursor && l.mode == listRename
			if renaming {
				title = l.edit + "▏"
			}
			// The cursor has a marker as well as reverse video, which
			// NO_COLOR terminals may not show.
			mark := "  "
			switch {
			case i == l.cursor:
				mark = "› "
			case it.ID == l.current:
				mark = "• "
			}
			meta := fmt.Sprintf(" %d msgs · %s", it.Messages, ago(it.Updated))
			if snip, ok := l.hits[it.ID]; ok && !strings.Contains(strings.ToLower(it.Title), strings.ToLower(l.filter)) {
				meta = " “" + truncate(printable(strings.Join(strings.Fields(snip), " ")), inner/2) + "”"
			}
			titleW := max(inner-lipgloss.Width(meta)-2, 8)
			if renaming {
				// Keep the end, where the cursor is, in view.
				title = truncateLeft(title, titleW)
			}
			line := mark + truncate(title, titleW)
			line += strings.Repeat(" ", max(inner-lipgloss.Width(line)-lipgloss.Width(meta), 1)) + st.Dim.Render(meta)
			if i == l.cursor {
				line = st.Selected.Render(xansiStrip(line))
			}
			b.WriteString(line + "\n")
		}
		if l.mode == listConfirmDelete {
			if it, ok := l.selected(); ok {
				b.WriteString(st.Warn.Render(fmt.Sprintf("delete %q? y / n", printable(it.Title))))
			}
		}
	}
	return st.Overlay.Width(width - 2).Render(strings.TrimRight(b.String(), "\n"))
}

// truncateLeft keeps the last width columns of s, with an ellipsis before
// them when it cuts.
func truncateLeft(s string, width int) string {
	if lipgloss.Width(s) <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && lipgloss.Width(string(r))+1 > width {
		r = r[1:]
	}
	return "…" + string(r)
}

// ago says how long ago t was, coarsely.
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Format("2006-01-02")
}

// Messages from session-list commands.
type (
	sessionsListedMsg struct {
		items []session.Info
		err   error
	}
	sessionLoadedMsg struct {
		sess *session.Session
		err  error
	}
	sessionChangedMsg struct {
		note string
		err  error
	}
	sessionsSearchedMsg struct {
		query string
		hits  []session.Hit
	}
)

// searchSessions looks for the filter in every message (the store's
// full-text index), so a chat can be found by what was said in it.
func (m *Model) searchSessions() tea.Cmd {
	store, query := m.opts.Store, m.sessions.filter
	if store == nil || len(strings.TrimSpace(query)) < 2 {
		m.sessions.hits = nil
		return nil
	}
	return func() tea.Msg {
		hits, err := store.Search(context.Background(), query+"*", session.SearchOptions{Limit: 200})
		if err != nil {
			hits = nil // a query FTS cannot parse just finds nothing
		}
		return sessionsSearchedMsg{query: query, hits: hits}
	}
}

func (m *Model) openSessions() tea.Cmd {
	if m.opts.Store == nil {
		return m.notify(errNoStore.Error(), true)
	}
	m.overlay = overlaySessions
	m.sessions.loading = true
	m.sessions.mode = listBrowse
	m.sessions.err = ""
	// Each opening starts from the whole list, not the last search.
	m.sessions.filter, m.sessions.hits, m.sessions.cursor = "", nil, 0
	return m.listSessions()
}

func (m *Model) listSessions() tea.Cmd {
	store := m.opts.Store
	return func() tea.Msg {
		items, err := store.List(context.Background())
		return sessionsListedMsg{items: items, err: err}
	}
}

func (m *Model) onSessionMsg(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case sessionsListedMsg:
		m.sessions.loading = false
		m.sessions.err = ""
		if msg.err != nil {
			m.sessions.err = msg.err.Error()
		}
		m.sessions.items = msg.items
		m.sessions.cursor = min(m.sessions.cursor, max(len(m.sessions.visible())-1, 0))
	case sessionLoadedMsg:
		if msg.err != nil {
			return m.notify("could not open: "+msg.err.Error(), true)
		}
		if m.generating {
			m.eng.Stop()
			m.flushPending()
			m.finishReply("stopped", m.reply)
		}
		m.eng.Reset()
		load := m.loadSession(msg.sess)
		m.overlay = overlayNone
		return tea.Batch(load, m.measureContext(), m.notify(fmt.Sprintf("resumed %q", printable(msg.sess.Title)), false))
	case sessionsSearchedMsg:
		if msg.query != m.sessions.filter {
			return nil // the user typed on
		}
		m.sessions.hits = map[int64]string{}
		for _, h := range msg.hits {
			if _, seen := m.sessions.hits[h.SessionID]; !seen {
				m.sessions.hits[h.SessionID] = strings.ReplaceAll(h.Snippet, "**", "")
			}
		}
		m.sessions.cursor = min(m.sessions.cursor, max(len(m.sessions.visible())-1, 0))
	case sessionChangedMsg:
		if msg.err != nil {
			m.sessions.err = msg.err.Error()
			return nil
		}
		return tea.Batch(m.notify(msg.note, false), m.listSessions())
	}
	return nil
}

// loadSession shows a stored conversation and continues it; the command
// reads its settings (/set).
func (m *Model) loadSession(sess *session.Session) tea.Cmd {
	m.editing = nil
	m.overrides = nil
	m.conv.Clear()
	m.system = ""
	for _, t := range sess.Turns {
		e := entry{content: t.Content, thinking: t.Thinking}
		switch t.Role {
		case "user":
			e.kind = entryUser
		case "system":
			e.kind = entrySystem
			m.system = t.Content
		default:
			e.kind = entryAssistant
			e.stopped = t.Stopped
			if t.Interrupted {
				e.reason = "interrupted"
			}
			e.stats = &engine.Stats{PrefillTokens: t.Stats.PromptTokens, DecodeTokens: t.Stats.GenTokens,
				PrefillTPS: t.Stats.PrefillTPS, DecodeTPS: t.Stats.DecodeTPS, TTFT: t.Stats.TTFT}
		}
		m.conv.entries = append(m.conv.entries, e)
	}
	m.conv.refresh()
	m.conv.Bottom()
	m.title = sess.Title
	m.sessions.current = sess.ID
	m.sessionID = sess.ID
	m.state.LastSession = sess.ID
	m.save.Attach(sess)
	m.systemSaved = true
	// The numbers shown were the previous chat's; this one's come with its
	// next reply.
	m.status.hasStats = false
	m.status.stats = engine.Stats{}
	m.resetContextNotes()
	return m.loadSettings(sess.ID)
}

// sessionsKey handles keys while the session list is open.
func (m *Model) sessionsKey(msg tea.KeyMsg) tea.Cmd {
	l := &m.sessions
	store := m.opts.Store
	switch l.mode {
	case listRename:
		switch msg.Type {
		case tea.KeyEsc:
			l.mode = listBrowse
		case tea.KeyEnter:
			l.mode = listBrowse
			it, ok := l.selected()
			if !ok {
				return nil
			}
			title := l.edit
			if it.ID == l.current {
				m.title = title
			}
			return func() tea.Msg {
				err := store.Rename(context.Background(), it.ID, title)
				return sessionChangedMsg{note: "renamed", err: err}
			}
		case tea.KeyBackspace:
			if r := []rune(l.edit); len(r) > 0 {
				l.edit = string(r[:len(r)-1])
			}
		case tea.KeyRunes, tea.KeySpace:
			l.edit += string(msg.Runes)
		}
		return nil
	case listConfirmDelete:
		l.mode = listBrowse
		it, ok := l.selected()
		if msg.String() != "y" || !ok {
			return nil
		}
		if it.ID == l.current {
			m.save.Detach()
			l.current = 0
		}
		if f, ok := m.eng.(interface{ ForgetSession(int64) }); ok {
			f.ForgetSession(it.ID) // its saved model state goes with it
		}
		return func() tea.Msg {
			err := store.Delete(context.Background(), it.ID)
			return sessionChangedMsg{note: "deleted", err: err}
		}
	}
	switch msg.String() {
	case "esc":
		if l.filter != "" {
			l.filter = ""
			l.cursor = 0
			l.hits = nil
			return nil
		}
		m.overlay = overlayNone
	case "up":
		l.cursor = max(l.cursor-1, 0)
	case "down":
		l.cursor = min(l.cursor+1, max(len(l.visible())-1, 0))
	case "enter":
		it, ok := l.selected()
		if !ok {
			return nil
		}
		return func() tea.Msg {
			sess, err := store.Load(context.Background(), it.ID)
			return sessionLoadedMsg{sess: sess, err: err}
		}
	case "ctrl+r":
		if it, ok := l.selected(); ok {
			l.mode, l.edit = listRename, it.Title
		}
	case "ctrl+x", "delete":
		if _, ok := l.selected(); ok {
			l.mode = listConfirmDelete
		}
	case "backspace":
		if r := []rune(l.filter); len(r) > 0 {
			l.filter = string(r[:len(r)-1])
			l.cursor = 0
			return m.searchSessions()
		}
	default:
		if msg.Type == tea.KeyRunes || msg.Type == tea.KeySpace {
			l.filter += string(msg.Runes)
			l.cursor = 0
			return m.searchSessions()
		} else if key := msg.String(); key == "f4" || key == "ctrl+s" {
			m.overlay = overlayNone
		}
	}
	return nil
}
