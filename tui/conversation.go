package tui

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
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
	reason   string        // why a reply ended ("stop", "length", "stopped", "interrupted")
	warn     bool          // a notice to heed (the model no longer sees old messages)

	cache      []string
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
// streamed, and a view that follows new text only while the user is at the
// bottom.
//
// It keeps the transcript as lines, in two parts: head, the settled entries,
// rendered once and only appended to; and tail, the last entries (the reply
// being streamed and the prompt before it), rendered again when they change.
// A frame therefore costs the size of the tail, not of the chat.
type conversation struct {
	styles  *Styles
	md      *markdownRenderer
	entries []entry

	streaming bool // the last entry is a reply still arriving
	stream    streamingMarkdown
	thinkOpen bool // thinking blocks expanded

	width, height int

	head      []string // lines of entries[:headCount], at headWidth
	headCount int
	headWidth int
	headOpen  bool
	tail      []string // lines of entries[headCount:], after a blank separator

	offset int  // first visible line
	follow bool // stay at the bottom as text arrives
}

func newConversation(styles *Styles, md *markdownRenderer) *conversation {
	return &conversation{styles: styles, md: md, follow: true}
}

// SetSize changes the panel's size; content is re-rendered at a new width.
func (c *conversation) SetSize(width, height int) {
	if width == c.width && height == c.height {
		return
	}
	widthChanged := width != c.width
	c.width, c.height = width, max(height, 1)
	if widthChanged {
		c.rerender()
	}
	c.clamp()
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

// add appends an entry; while a reply streams, anything else goes before
// it, so that the reply stays the last entry the stream writes to.
func (c *conversation) add(e entry) {
	if i := len(c.entries) - 1; c.streaming && e.kind != entryAssistant {
		c.entries = slices.Insert(c.entries, i, e)
		if c.headCount > i {
			c.resetHead()
		}
	} else {
		c.entries = append(c.entries, e)
	}
	c.refresh()
}

// Notice adds a line from bonsai itself to the transcript.
func (c *conversation) Notice(text string) { c.add(entry{kind: entryNotice, content: text}) }

// lastErrorIs says whether the transcript's last entry is the error text
// (an engine error already shown there is not repeated).
func (c *conversation) lastErrorIs(text string) bool {
	n := len(c.entries)
	return n > 0 && c.entries[n-1].kind == entryError && strings.HasPrefix(c.entries[n-1].content, text)
}

// Warning adds a notice to heed, in the warning colour.
func (c *conversation) Warning(text string) {
	c.add(entry{kind: entryNotice, content: text, warn: true})
}

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
	c.stream = streamingMarkdown{}
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
		c.resetHead()
	}
	c.refresh()
}

// Restore appends entries taken away by Truncate (an edit given up).
func (c *conversation) Restore(entries []entry) {
	c.entries = append(c.entries, entries...)
	c.refresh()
}

// Clear forgets every entry.
func (c *conversation) Clear() {
	c.entries = nil
	c.streaming = false
	c.resetHead()
	c.refresh()
}

// HasThinking reports whether any reply holds reasoning to fold or unfold.
func (c *conversation) HasThinking() bool {
	for _, e := range c.entries {
		if e.thinking != "" {
			return true
		}
	}
	return false
}

// ToggleThinking folds or unfolds every thinking block.
func (c *conversation) ToggleThinking() {
	c.thinkOpen = !c.thinkOpen
	c.rerender()
}

func (c *conversation) total() int { return len(c.head) + len(c.tail) }

func (c *conversation) maxOffset() int { return max(c.total()-c.height, 0) }

func (c *conversation) clamp() {
	if c.follow {
		c.offset = c.maxOffset()
		return
	}
	c.offset = min(max(c.offset, 0), c.maxOffset())
	if c.offset == c.maxOffset() {
		c.follow = true
	}
}

// ScrollUp, ScrollDown and Bottom move the view; scrolling up leaves follow
// mode, and reaching the bottom again re-enters it.
func (c *conversation) ScrollUp(lines int) {
	c.offset = max(c.offset-lines, 0)
	c.follow = c.offset >= c.maxOffset()
}

func (c *conversation) ScrollDown(lines int) {
	c.offset += lines
	c.follow = c.offset >= c.maxOffset()
	c.clamp()
}

func (c *conversation) Bottom() {
	c.follow = true
	c.clamp()
}

// Following reports whether new text scrolls into view.
func (c *conversation) Following() bool { return c.follow }

func (c *conversation) resetHead() {
	c.head, c.headCount = nil, 0
}

// rerender drops every cached line (the width or folding changed).
func (c *conversation) rerender() {
	c.resetHead()
	c.refresh()
}

// refresh brings head and tail up to date and keeps the view pinned to the
// bottom if it was there.
func (c *conversation) refresh() {
	if c.width <= 0 {
		return
	}
	if c.headWidth != c.width || c.headOpen != c.thinkOpen {
		c.resetHead()
		c.headWidth, c.headOpen = c.width, c.thinkOpen
	}
	// The head covers every entry but the last two, which stay outside it
	// because streaming, regenerate and edit change them.
	for settled := len(c.entries) - 2; c.headCount < settled; c.headCount++ {
		if len(c.head) > 0 {
			c.head = append(c.head, "")
		}
		c.head = append(c.head, c.renderEntry(&c.entries[c.headCount], false)...)
	}
	c.tail = c.tail[:0]
	for i := c.headCount; i < len(c.entries); i++ {
		if len(c.head) > 0 || len(c.tail) > 0 {
			c.tail = append(c.tail, "")
		}
		live := c.streaming && i == len(c.entries)-1
		c.tail = append(c.tail, c.renderEntry(&c.entries[i], live)...)
	}
	if len(c.entries) == 0 {
		c.tail = append(c.tail, c.styles.Dim.Render("Type a message and press enter. ? or F1 for help."))
	}
	c.clamp()
}

// renderEntry renders one entry at the panel's width, from cache when the
// entry is finished.
func (c *conversation) renderEntry(e *entry, live bool) []string {
	if !live && e.cache != nil && e.cacheWidth == c.width && e.cacheOpen == c.thinkOpen {
		return e.cache
	}
	out := c.renderUncached(e, live)
	if !live {
		e.cache, e.cacheWidth, e.cacheOpen = out, c.width, c.thinkOpen
	}
	return out
}

const bodyIndent = "  "

// maxTextWidth bounds the transcript's text: past about a hundred columns
// lines get hard to follow, so a wide terminal gets a margin instead.
const maxTextWidth = 100

// indent prefixes lines with the body indent (cheaper than a lipgloss
// padding, which measures every line).
func indent(dst []string, lines ...string) []string {
	for _, l := range lines {
		if l == "" {
			dst = append(dst, "")
			continue
		}
		dst = append(dst, bodyIndent+l)
	}
	return dst
}

func splitLines(s string) []string { return strings.Split(s, "\n") }

// nbHyphen stands in for "-" while text is wrapped: the wrapper breaks
// after any hyphen, which split "--ctx" over two lines.
const nbHyphen = "\u2011"

// wrapWhole renders text in style, wrapping at spaces only, so that flags
// and hyphenated names stay whole.
func wrapWhole(style lipgloss.Style, text string) string {
	out := style.Render(strings.ReplaceAll(text, "-", nbHyphen))
	return strings.ReplaceAll(out, nbHyphen, "-")
}

func (c *conversation) renderUncached(e *entry, live bool) []string {
	s := c.styles
	inner := min(max(c.width-len(bodyIndent), 10), maxTextWidth)
	var out []string
	switch e.kind {
	case entryUser:
		out = append(out, s.UserLabel.Render("▌ you"))
		return indent(out, splitLines(lipgloss.NewStyle().Width(inner).Render(printable(e.content)))...)
	case entrySystem:
		out = append(out, s.Dim.Render("▌ system prompt"))
		return indent(out, splitLines(s.Dim.Width(inner).Render(printable(e.content)))...)
	case entryNotice:
		style := s.Notice
		if e.warn {
			style = s.Warn
		}
		return splitLines(wrapWhole(style.Width(min(c.width, maxTextWidth)), "· "+printable(e.content)))
	case entryError:
		return splitLines(wrapWhole(s.Error.Width(min(c.width, maxTextWidth)), "✗ "+printable(e.content)))
	}

	label := s.BotLabel.Render("● bonsai")
	if live {
		label += s.Dim.Render("  …")
	}
	out = append(out, label)
	if e.thinking != "" {
		out = indent(out, c.renderThinking(e, live, inner)...)
	}
	switch {
	case live:
		out = indent(out, c.stream.Lines(c.md, numberCodeBlocks(printable(e.content)), inner)...)
	case e.content != "":
		out = indent(out, splitLines(c.md.Render(numberCodeBlocks(printable(e.content)), inner))...)
	}
	if !live {
		if f := c.footer(e); f != "" {
			out = indent(out, f)
		}
	}
	return out
}

// renderThinking shows a thought dim: whole when unfolded, else a one-line
// summary once finished, or the last few lines while it streams.
func (c *conversation) renderThinking(e *entry, live bool, width int) []string {
	s := c.styles
	thought := strings.TrimSpace(printable(e.thinking))
	words := len(strings.Fields(thought))
	if c.thinkOpen {
		return splitLines(s.Thinking.Width(width).Render(thought))
	}
	if live && e.content == "" {
		// Wrap only the end of the thought: it can be very long.
		tail := thought
		if limit := width * thinkingTailLines * 2; len(tail) > limit {
			tail = tail[len(tail)-limit:]
			for i := 0; i < 4 && i < len(tail) && !utf8.RuneStart(tail[0]); i++ {
				tail = tail[1:]
			}
		}
		wrapped := splitLines(s.Thinking.Width(width).Render(tail))
		if len(wrapped) > thinkingTailLines {
			wrapped = wrapped[len(wrapped)-thinkingTailLines:]
		}
		head := s.Dim.Render(fmt.Sprintf("▾ thinking… %d words (ctrl+t shows all)", words))
		return append([]string{head}, wrapped...)
	}
	return []string{s.Dim.Render(fmt.Sprintf("▸ thought for %d words (ctrl+t shows)", words))}
}

func (c *conversation) footer(e *entry) string {
	s := c.styles
	var bits []string
	if e.reason == "interrupted" {
		bits = append(bits, s.Warn.Render("■ interrupted (bonsai ended while it streamed)"))
	} else if e.stopped {
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

// View is the visible part of the transcript, exactly height lines.
func (c *conversation) View() string {
	lines := make([]string, 0, c.height)
	for i := c.offset; i < c.offset+c.height && i < c.total(); i++ {
		if i < len(c.head) {
			lines = append(lines, c.head[i])
		} else {
			lines = append(lines, c.tail[i-len(c.head)])
		}
	}
	for len(lines) < c.height {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}
