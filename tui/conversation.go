package tui

import (
	"fmt"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/charmbracelet/bubbles/viewport"
	"github.com/charmbracelet/lipgloss"
)

// entryKind says what an entry in the transcript is.
type entryKind int

const (
	entryUser entryKind = iota
	entryAssistant
	entrySystem // the conversation's system prompt
	entryNotice // a note from bonsai itself (not sent to the model)
	entryError
)

// entry is one block of the transcript. Finished entries cache their
// rendering for one (width, thinking-open) pair, so that a long chat costs
// nothing per frame while a reply streams.
type entry struct {
	kind     entryKind
	content  string
	thinking string
	stopped  bool          // the user stopped this reply
	stats    *engine.Stats // a finished reply's numbers
	reason   string        // why a reply ended ("stop", "length", "stopped")

	cache      string
	cacheWidth int
	cacheOpen  bool
}

// message converts an entry to what the model sees, or false for entries the
// model never sees (notices, errors).
func (e entry) message() (chat.Message, bool) {
	switch e.kind {
	case entryUser:
		return chat.Message{Role: chat.RoleUser, Content: e.content}, true
	case entryAssistant:
		return chat.Message{Role: chat.RoleAssistant, Content: e.content, Thinking: e.thinking}, true
	case entrySystem:
		return chat.Message{Role: chat.RoleSystem, Content: e.content}, true
	}
	return chat.Message{}, false
}

// thinkingTailLines is how much of a streaming thought is shown while it is
// folded: enough to see it move, bounded so a long thought costs little.
const thinkingTailLines = 4

// conversation is the transcript panel: the entries, the reply being
// streamed, and a viewport that follows new text only while the user is at
// the bottom.
type conversation struct {
	styles  *Styles
	md      *markdownRenderer
	entries []entry

	streaming bool // the last entry is a reply still arriving
	stream    streamingMarkdown
	thinkOpen bool // thinking blocks expanded

	vp            viewport.Model
	width, height int

	// head is the joined rendering of entries[:headCount] at headWidth; only
	// the entries after it are rendered when content changes.
	head      string
	headCount int
	headWidth int
	headOpen  bool
}

func newConversation(styles *Styles, md *markdownRenderer) *conversation {
	vp := viewport.New(0, 0)
	vp.MouseWheelEnabled = true
	return &conversation{styles: styles, md: md, vp: vp}
}

// SetSize changes the panel's size; content is re-rendered at the new width.
func (c *conversation) SetSize(width, height int) {
	if width == c.width && height == c.height {
		return
	}
	follow := c.vp.AtBottom()
	widthChanged := width != c.width
	c.width, c.height = width, height
	c.vp.Width, c.vp.Height = width, max(height, 1)
	if widthChanged {
		c.vp.SetContent(c.render())
	}
	if follow {
		c.vp.GotoBottom()
	} else {
		c.vp.SetYOffset(c.vp.YOffset) // clamp to the new height
	}
}

// Messages is the conversation as the model sees it.
func (c *conversation) Messages() []chat.Message {
	var msgs []chat.Message
	for _, e := range c.entries {
		if m, ok := e.message(); ok {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

func (c *conversation) add(e entry) {
	c.entries = append(c.entries, e)
	c.refresh()
}

// Notice adds a line from bonsai itself to the transcript.
func (c *conversation) Notice(text string) { c.add(entry{kind: entryNotice, content: text}) }

// Error adds an error to the transcript.
func (c *conversation) Error(text string) { c.add(entry{kind: entryError, content: text}) }

// StartReply opens an empty assistant entry that tokens stream into.
func (c *conversation) StartReply() {
	c.entries = append(c.entries, entry{kind: entryAssistant})
	c.streaming = true
	c.stream = streamingMarkdown{}
	c.refresh()
}

// AppendReply adds streamed text to the open reply.
func (c *conversation) AppendReply(thinking, content string) {
	if !c.streaming || (thinking == "" && content == "") {
		return
	}
	last := &c.entries[len(c.entries)-1]
	last.thinking += thinking
	last.content += content
	c.refresh()
}

// FinishReply closes the open reply. A reply stopped before any text arrived
// is kept (marked stopped) so the transcript shows what happened.
func (c *conversation) FinishReply(reason string, stats *engine.Stats) {
	if !c.streaming {
		return
	}
	last := &c.entries[len(c.entries)-1]
	last.reason = reason
	last.stopped = reason == "stopped"
	last.stats = stats
	c.streaming = false
	c.refresh()
}

// LastReply returns the last assistant entry's index, or -1.
func (c *conversation) LastReply() int {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].kind == entryAssistant {
			return i
		}
	}
	return -1
}

// LastUser returns the last user entry's index, or -1.
func (c *conversation) LastUser() int {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if c.entries[i].kind == entryUser {
			return i
		}
	}
	return -1
}

// Truncate drops entries from index i on.
func (c *conversation) Truncate(i int) {
	if i < 0 || i >= len(c.entries) {
		return
	}
	c.entries = c.entries[:i]
	c.streaming = false
	if c.headCount > i {
		c.head, c.headCount = "", 0
	}
	c.refresh()
}

// Clear forgets every entry.
func (c *conversation) Clear() {
	c.entries = nil
	c.streaming = false
	c.head, c.headCount = "", 0
	c.refresh()
}

// ToggleThinking folds or unfolds every thinking block.
func (c *conversation) ToggleThinking() {
	c.thinkOpen = !c.thinkOpen
	c.refresh()
}

// ScrollUp, ScrollDown and Bottom move the view; scrolling up leaves follow
// mode, and reaching the bottom again re-enters it.
func (c *conversation) ScrollUp(lines int)   { c.vp.ScrollUp(lines) }
func (c *conversation) ScrollDown(lines int) { c.vp.ScrollDown(lines) }
func (c *conversation) Bottom()              { c.vp.GotoBottom() }

// Following reports whether new text scrolls into view.
func (c *conversation) Following() bool { return c.vp.AtBottom() }

// refresh rebuilds the viewport's content, keeping the view pinned to the
// bottom only if it was there.
func (c *conversation) refresh() {
	if c.width <= 0 {
		return
	}
	follow := c.vp.AtBottom() || c.vp.TotalLineCount() <= c.vp.Height
	c.vp.SetContent(c.render())
	if follow {
		c.vp.GotoBottom()
	}
}

// render joins the cached head with the entries after it. The head grows to
// cover every finished entry but the last one, which stays outside it because
// regenerate and edit replace it.
func (c *conversation) render() string {
	width := c.width
	if c.headWidth != width || c.headOpen != c.thinkOpen {
		c.head, c.headCount, c.headWidth, c.headOpen = "", 0, width, c.thinkOpen
	}
	settled := len(c.entries) - 2
	for c.headCount < settled {
		block := c.renderEntry(&c.entries[c.headCount], false)
		c.head = joinBlocks(c.head, block)
		c.headCount++
	}
	out := c.head
	for i := c.headCount; i < len(c.entries); i++ {
		live := c.streaming && i == len(c.entries)-1
		out = joinBlocks(out, c.renderEntry(&c.entries[i], live))
	}
	if out == "" {
		out = c.styles.Dim.Render("Type a message and press enter. F1 for help.")
	}
	return out
}

func joinBlocks(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

// renderEntry renders one entry at the panel's width, from cache when the
// entry is finished.
func (c *conversation) renderEntry(e *entry, live bool) string {
	if !live && e.cache != "" && e.cacheWidth == c.width && e.cacheOpen == c.thinkOpen {
		return e.cache
	}
	out := c.renderUncached(e, live)
	if !live {
		e.cache, e.cacheWidth, e.cacheOpen = out, c.width, c.thinkOpen
	}
	return out
}

const bodyIndent = 2

func (c *conversation) renderUncached(e *entry, live bool) string {
	s := c.styles
	inner := max(c.width-bodyIndent, 10)
	indent := lipgloss.NewStyle().PaddingLeft(bodyIndent)
	wrap := lipgloss.NewStyle().Width(inner)
	switch e.kind {
	case entryUser:
		return s.UserLabel.Render("▌ you") + "\n" + indent.Render(wrap.Render(e.content))
	case entrySystem:
		return s.Dim.Render("▌ system prompt") + "\n" + indent.Render(s.Dim.Width(inner).Render(e.content))
	case entryNotice:
		return s.Dim.Width(c.width).Render("· " + e.content)
	case entryError:
		return s.Error.Width(c.width).Render("✗ " + e.content)
	}

	var parts []string
	label := s.BotLabel.Render("● bonsai")
	if live {
		label += s.Dim.Render("  …")
	}
	parts = append(parts, label)
	if e.thinking != "" {
		parts = append(parts, indent.Render(c.renderThinking(e, live, inner)))
	}
	switch {
	case live:
		parts = append(parts, indent.Render(c.stream.Render(c.md, e.content, inner)))
	case e.content != "":
		parts = append(parts, indent.Render(c.md.Render(e.content, inner)))
	}
	if !live {
		if f := c.footer(e); f != "" {
			parts = append(parts, indent.Render(f))
		}
	}
	return strings.Join(nonEmpty(parts), "\n")
}

// renderThinking shows a thought dim: whole when unfolded, else a one-line
// summary once finished, or the last few lines while it streams.
func (c *conversation) renderThinking(e *entry, live bool, width int) string {
	s := c.styles
	thought := strings.TrimSpace(e.thinking)
	words := len(strings.Fields(thought))
	if c.thinkOpen {
		return s.Thinking.Width(width).Render(thought)
	}
	if live && e.content == "" {
		wrapped := strings.Split(s.Thinking.Width(width).Render(thought), "\n")
		if len(wrapped) > thinkingTailLines {
			wrapped = wrapped[len(wrapped)-thinkingTailLines:]
		}
		head := s.Dim.Render(fmt.Sprintf("▾ thinking… %d words (ctrl+t shows all)", words))
		return head + "\n" + strings.Join(wrapped, "\n")
	}
	return s.Dim.Render(fmt.Sprintf("▸ thought for %d words (ctrl+t shows)", words))
}

func (c *conversation) footer(e *entry) string {
	s := c.styles
	var bits []string
	if e.stopped {
		bits = append(bits, s.Warn.Render("■ stopped"))
	} else if e.reason == "length" {
		bits = append(bits, s.Warn.Render("■ cut off (length limit)"))
	}
	if st := e.stats; st != nil && st.DecodeTokens > 0 {
		bits = append(bits, s.Dim.Render(fmt.Sprintf("%d tokens · %.1f tok/s · first token %s",
			st.DecodeTokens, st.DecodeTPS, formatDuration(st.TTFT))))
	}
	return strings.Join(bits, s.Dim.Render(" · "))
}

func nonEmpty(parts []string) []string {
	out := parts[:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// View is the visible part of the transcript.
func (c *conversation) View() string { return c.vp.View() }
