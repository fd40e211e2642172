package tui

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/charmbracelet/glamour"
	"github.com/charmbracelet/glamour/ansi"
	xansi "github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// markdownRenderer turns markdown into terminal text at a given width. It
// keeps one glamour renderer per width (glamour bakes the wrap width in) and
// is used only from the bubbletea goroutine, since glamour renderers are
// stateful.
type markdownRenderer struct {
	style     ansi.StyleConfig
	profile   termenv.Profile
	renderers map[int]*glamour.TermRenderer
}

func newMarkdownRenderer(profile termenv.Profile, dark bool) *markdownRenderer {
	return &markdownRenderer{
		style:     markdownStyle(profile, dark),
		profile:   profile,
		renderers: map[int]*glamour.TermRenderer{},
	}
}

// Render returns src rendered to width columns, without leading or trailing
// blank lines and without the padding glamour adds to the right of each line.
// When glamour fails (it should not on any input), the source is shown as is
// so that a reply is never lost.
func (m *markdownRenderer) Render(src string, width int) string {
	if strings.TrimSpace(src) == "" {
		return ""
	}
	width = max(width, 10)
	r, ok := m.renderers[width]
	if !ok {
		var err error
		r, err = glamour.NewTermRenderer(
			glamour.WithStyles(m.style),
			// glamour's own wrapping overshoots the width it is given
			// and then wraps again, stranding single words on lines of
			// their own (measured at 60 and 98 columns); so it renders
			// unwrapped and the lines are word-wrapped below.
			glamour.WithWordWrap(0),
			glamour.WithColorProfile(m.profile),
		)
		if err != nil {
			return src
		}
		m.renderers[width] = r
	}
	out, err := r.Render(src)
	if err != nil {
		return src
	}
	// glamour lets a word longer than the width overflow; break it so the
	// panel never cuts text off.
	// Tabs (from code blocks) are expanded: a terminal would move them to
	// its own tab stops, which the layout cannot see.
	out = strings.ReplaceAll(out, "\t", "    ")
	out = xansi.Wordwrap(trimBlankEdges(trimLineEnds(out)), width, "")
	return selfContainedLines(xansi.Hardwrap(out, width, true))
}

// selfContainedLines makes every line carry its own style: glamour sets a
// paragraph's colour once, so the lines wrapping made of it began with no
// style and showed in the terminal's colours wherever something reset the
// style at a line's end (the layout does, beside a panel), up to the next
// styled word. Each line now opens with the styles in force where the one
// before ended, and ends with a reset.
func selfContainedLines(s string) string {
	if !strings.Contains(s, "\x1b[") {
		return s
	}
	lines := strings.Split(s, "\n")
	var active string // the SGR sequences since the last reset
	for i, line := range lines {
		opened := active
		for _, seq := range sgrSeq.FindAllString(line, -1) {
			if params := seq[2 : len(seq)-1]; params == "" || params == "0" {
				active = ""
			} else {
				active += seq
			}
		}
		if opened != "" {
			line = opened + line
		}
		if active != "" {
			line += "\x1b[0m"
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}

// sgrSeq matches one SGR (style) escape sequence.
var sgrSeq = regexp.MustCompile("\x1b\\[[0-9;:]*m")

// ansiSeq matches one SGR or other CSI escape sequence.
var ansiSeq = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

// trimLineEnds drops the spaces glamour pads every line with, keeping any
// escape sequences among them so that styles still reset.
func trimLineEnds(s string) string {
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		lines[i] = trimRightKeepingEscapes(line)
	}
	return strings.Join(lines, "\n")
}

func trimRightKeepingEscapes(line string) string {
	var tail []string // escape sequences at the end, last first
	for {
		line = strings.TrimRight(line, " ")
		esc := strings.LastIndexByte(line, 0x1b)
		if esc < 0 || !isCSI(line[esc:]) {
			break
		}
		tail = append(tail, line[esc:])
		line = line[:esc]
	}
	for i := len(tail) - 1; i >= 0; i-- {
		line += tail[i]
	}
	return line
}

// isCSI reports whether s is exactly one CSI sequence (ESC [ params final).
func isCSI(s string) bool {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return false
	}
	for i := 2; i < len(s)-1; i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c == ';' || c == '?') {
			return false
		}
	}
	c := s[len(s)-1]
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

// trimBlankEdges removes blank lines (possibly holding only escapes) at the
// start and end.
func trimBlankEdges(s string) string {
	lines := strings.Split(s, "\n")
	blank := func(l string) bool { return strings.TrimSpace(ansiSeq.ReplaceAllString(l, "")) == "" }
	for len(lines) > 0 && blank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && blank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// streamingMarkdown renders a reply while it grows. Text up to the last safe
// block boundary (see stableBoundary) is rendered once, chunk by chunk, and
// kept as lines; only the tail after it is rendered again on each frame, so
// a long reply costs O(length) over its whole stream instead of O(length²).
// When the reply is complete the conversation renders it whole once more,
// which repairs any difference chunking made.
type streamingMarkdown struct {
	width     int
	stableLen int      // bytes of the source already rendered as stable chunks
	stable    []string // lines of the stable chunks, a blank line between chunks
}

// Lines returns the view of src as lines. src must extend the source of the
// previous call (anything else starts over). The result shares its prefix
// with the cache: callers must not modify it.
func (s *streamingMarkdown) Lines(md *markdownRenderer, src string, width int) []string {
	if width != s.width || len(src) < s.stableLen {
		*s = streamingMarkdown{width: width}
	}
	if b := stableBoundary(src); b > s.stableLen {
		if out := md.Render(src[s.stableLen:b], width); out != "" {
			if len(s.stable) > 0 {
				s.stable = append(s.stable, "")
			}
			s.stable = append(s.stable, strings.Split(out, "\n")...)
		}
		s.stableLen = b
	}
	lines := s.stable[:len(s.stable):len(s.stable)]
	if tail := md.Render(src[s.stableLen:], width); tail != "" {
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, strings.Split(tail, "\n")...)
	}
	return lines
}

// Render is Lines joined.
func (s *streamingMarkdown) Render(md *markdownRenderer, src string, width int) string {
	return strings.Join(s.Lines(md, src, width), "\n")
}

// stableBoundary returns the byte offset of the last point in src where the
// markdown before it can be rendered on its own without changing what it
// looks like: the start of a line that follows a blank line, outside a code
// fence, where neither the block before nor the line after belongs to a
// list, quote, table or indented block (those merge across blank lines). It
// returns 0 when there is none.
func stableBoundary(src string) int {
	inFence := false
	fence := ""
	best := 0
	offset := 0
	prevContent := "" // last non-blank line before the current position
	sawBlank := false // a blank line separates prevContent from here
	lines := strings.SplitAfter(src, "\n")
	for i, raw := range lines {
		start := offset
		offset += len(raw)
		complete := strings.HasSuffix(raw, "\n")
		line := strings.TrimRight(raw, "\n")
		trimmed := strings.TrimLeft(line, " ")
		if inFence {
			if complete && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				inFence = false
			}
			prevContent, sawBlank = line, false
			continue
		}
		if strings.TrimSpace(line) == "" {
			if complete {
				sawBlank = true
			}
			continue
		}
		if sawBlank && i > 0 && !continuesBlock(prevContent) && !continuesBlock(line) {
			best = start
		}
		if f := fenceOpener(trimmed); f != "" && len(line)-len(trimmed) < 4 {
			inFence, fence = true, f
		}
		prevContent, sawBlank = line, false
	}
	return best
}

var listMarker = regexp.MustCompile(`^\s*([-*+]|\d{1,9}[.)])(\s|$)`)

// continuesBlock reports whether a line belongs to a block that markdown
// lets span blank lines (lists, quotes, tables, indented code).
func continuesBlock(line string) bool {
	if line == "" {
		return false
	}
	if line[0] == ' ' || line[0] == '\t' {
		return true
	}
	t := strings.TrimSpace(line)
	return listMarker.MatchString(line) || strings.HasPrefix(t, ">") || strings.HasPrefix(t, "|")
}

// fenceOpener returns the fence (``` or ~~~, possibly longer) a line opens,
// or "".
func fenceOpener(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := 0
		for n < len(trimmed) && trimmed[n:n+1] == c {
			n++
		}
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// numberCodeBlocks puts a small label above each fenced code block of a
// reply, numbered as codeBlocks (and so /copy N) counts them. A fence is
// labelled once its line is complete, so numbering a growing reply only
// ever inserts text at or after its last line, which the streaming
// renderer relies on.
func numberCodeBlocks(src string) string {
	if !strings.Contains(src, "```") && !strings.Contains(src, "~~~") {
		return src
	}
	var b strings.Builder
	b.Grow(len(src) + 64)
	n := 0
	fence := ""
	prevBlank := true
	lines := strings.SplitAfter(src, "\n")
	for _, raw := range lines {
		line := strings.TrimSuffix(raw, "\n")
		trimmed := strings.TrimLeft(line, " ")
		lead := len(line) - len(trimmed)
		switch {
		case fence == "":
			if f := fenceOpener(trimmed); f != "" && lead < 4 {
				fence = f
				if strings.HasSuffix(raw, "\n") {
					n++
					if !prevBlank {
						b.WriteString("\n") // not the end of the paragraph before
					}
					fmt.Fprintf(&b, "%s*code %d · /copy %d*\n", line[:lead], n, n)
				}
			}
		case strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "":
			fence = ""
		}
		b.WriteString(raw)
		prevBlank = strings.TrimSpace(line) == ""
	}
	return b.String()
}

// codeBlocks returns the contents of the fenced code blocks in src, in order,
// for copying. An unterminated last block is included as far as it goes.
func codeBlocks(src string) []string {
	var blocks []string
	var cur []string
	fence := ""
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence == "" {
			if f := fenceOpener(trimmed); f != "" && len(line)-len(trimmed) < 4 {
				fence, cur = f, nil
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			blocks = append(blocks, strings.Join(cur, "\n"))
			fence = ""
			continue
		}
		cur = append(cur, line)
	}
	if fence != "" {
		blocks = append(blocks, strings.Join(cur, "\n"))
	}
	return blocks
}
