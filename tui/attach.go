package tui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bonsai-chat/bonsai/infer/chat"
	tea "github.com/charmbracelet/bubbletea"
)

// maxAttachBytes bounds a file attached to a message: a mebibyte of text is
// about 250,000 tokens, past any context bonsai runs, so anything larger
// is refused before it is read.
const maxAttachBytes = 1 << 20

// Why a file is not attached; the message says which file and what to do.
var (
	ErrAttachTooBig = errors.New("too big for the context")
	ErrAttachBinary = errors.New("not a text file")
	ErrAttachDir    = errors.New("a directory, not a file")
)

// attachment is a file that goes with the next message.
type attachment struct {
	path, name, text string
	tokens           int
	estimated        bool // no tokenizer to ask: about 4 bytes a token
}

// tokenCounter is an engine that measures messages in tokens
// (engine.Engine.CountTokens).
type tokenCounter interface {
	CountTokens(msgs []chat.Message, think bool) (int, error)
}

// attachedMsg brings a file read for attaching, or why it was not.
type attachedMsg struct {
	att  attachment
	path string
	err  error
	// mention: the file was named as @path in a message being sent; a
	// path that does not exist is then just text.
	mention bool
}

// block is how an attached file travels in the message: named, fenced.
func (a attachment) block() string {
	return fmt.Sprintf("File %s:\n```\n%s\n```", a.name, strings.TrimRight(a.text, "\n"))
}

// withAttachments is the message text with the files attached to it.
func withAttachments(text string, atts []attachment) string {
	parts := []string{text}
	for _, a := range atts {
		parts = append(parts, a.block())
	}
	return strings.Join(parts, "\n\n")
}

// attachFile reads path in the background and measures it in tokens.
func (m *Model) attachFile(path string, mention bool) tea.Cmd {
	path = expandHome(path, m.opts.HomeDir)
	counter, _ := m.eng.(tokenCounter)
	think := m.think
	return func() tea.Msg {
		att, err := readAttachment(path, counter, think)
		return attachedMsg{att: att, path: path, err: err, mention: mention}
	}
}

// readAttachment reads a text file of at most maxAttachBytes and counts
// its tokens as the model will see it.
func readAttachment(path string, counter tokenCounter, think bool) (attachment, error) {
	att := attachment{path: path, name: filepath.Base(path)}
	f, err := os.Open(path)
	if err != nil {
		return att, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return att, err
	case st.IsDir():
		return att, ErrAttachDir
	case st.Size() > maxAttachBytes:
		return att, fmt.Errorf("%w: %s (at most %s)", ErrAttachTooBig, formatBytes(st.Size()), formatBytes(maxAttachBytes))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxAttachBytes+1))
	if err != nil {
		return att, err
	}
	if len(data) > maxAttachBytes {
		return att, fmt.Errorf("%w: more than %s", ErrAttachTooBig, formatBytes(maxAttachBytes))
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return att, ErrAttachBinary
	}
	att.text = string(data)
	att.tokens, att.estimated = len(data)/4+1, true
	if counter != nil {
		with, err1 := counter.CountTokens([]chat.Message{{Role: chat.RoleUser, Content: "\n\n" + att.block()}}, think)
		without, err2 := counter.CountTokens([]chat.Message{{Role: chat.RoleUser}}, think)
		if err1 == nil && err2 == nil {
			att.tokens, att.estimated = with-without, false
		}
	}
	return att, nil
}

// attachRoom is how many tokens of the context a message may bring: the
// context less the room a reply needs (an eighth, as the engine keeps).
func (m *Model) attachRoom() int {
	if m.info == nil || m.info.ContextSize <= 0 {
		return 0
	}
	return m.info.ContextSize - m.info.ContextSize/8
}

// attached takes a read file: it joins the next message if the context can
// hold it.
func (m *Model) attached(msg attachedMsg) tea.Cmd {
	if msg.mention {
		m.mentions--
	}
	err := msg.err
	if msg.mention && errors.Is(err, fs.ErrNotExist) {
		err = nil // "@name" that is no file is text
	} else if err == nil {
		total := msg.att.tokens
		for _, a := range m.attachments {
			total += a.tokens
		}
		if room := m.attachRoom(); room > 0 && total > room {
			what := fmt.Sprintf("%d tokens", total)
			if len(m.attachments) > 0 {
				what += " with what is attached"
			}
			err = fmt.Errorf("%w: %s, and a message can bring at most %d of the %d-token context (--ctx gives more)",
				ErrAttachTooBig, what, room, m.info.ContextSize)
		} else if !slices.ContainsFunc(m.attachments, func(a attachment) bool { return a.path == msg.att.path }) {
			m.attachments = append(m.attachments, msg.att)
		}
	}
	if err != nil {
		m.sendAfterAttach = "" // the message waits in the input
		m.mentions = 0
		return m.notify(fmt.Sprintf("not attached: %s: %v", printable(msg.path), userError(err)), true)
	}
	if m.sendAfterAttach != "" && m.mentions == 0 {
		text := m.sendAfterAttach
		m.sendAfterAttach = ""
		return m.send(text)
	}
	if msg.mention || msg.att.name == "" {
		return nil
	}
	return m.notify(fmt.Sprintf("attached %s (%s); it goes with your next message · /file none removes it",
		printable(msg.att.name), tokenCount(msg.att)), false)
}

// userError says what an error from reading a file means, without Go's
// wording of the path it already names.
func userError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errors.New("no such file")
		case errors.Is(err, fs.ErrPermission):
			return errors.New("permission denied")
		}
		return pe.Err
	}
	return err
}

func tokenCount(a attachment) string {
	if a.estimated {
		return fmt.Sprintf("about %d tokens", a.tokens)
	}
	return fmt.Sprintf("%d tokens", a.tokens)
}

// fileCommand runs /file PATH (attach), /file none (drop what is
// attached) and /file alone (list it).
func (m *Model) fileCommand(arg string) tea.Cmd {
	switch arg {
	case "":
		if len(m.attachments) == 0 {
			return m.notify("/file PATH attaches a text file to your next message (or type @PATH; tab completes it)", false)
		}
		return m.notify("attached: "+m.attachmentSummary()+" · /file none removes them", false)
	case "none":
		m.attachments = nil
		return m.notify("nothing attached", false)
	}
	return m.attachFile(arg, false)
}

// attachmentSummary names what is attached, with the tokens it takes.
func (m *Model) attachmentSummary() string {
	var parts []string
	for _, a := range m.attachments {
		parts = append(parts, fmt.Sprintf("%s (%s)", printable(a.name), tokenCount(a)))
	}
	return strings.Join(parts, ", ")
}

// mentionedFiles are the @path words of a message not yet attached.
func (m *Model) mentionedFiles(text string) []string {
	var out []string
	for _, w := range strings.Fields(text) {
		if len(w) < 2 || w[0] != '@' {
			continue
		}
		path := expandHome(w[1:], m.opts.HomeDir)
		if !slices.ContainsFunc(m.attachments, func(a attachment) bool { return a.path == path }) && !slices.Contains(out, w[1:]) {
			out = append(out, w[1:])
		}
	}
	return out
}

// sendWithMentions sends text once the files it names as @path are read
// and fit; at once when it names none.
func (m *Model) sendWithMentions(text string) tea.Cmd {
	files := m.mentionedFiles(text)
	if len(files) == 0 {
		return m.send(text)
	}
	if ok, why := m.canGenerate(); !ok {
		return m.notify("not sent: "+why, true)
	}
	m.sendAfterAttach, m.mentions = text, len(files)
	var cmds []tea.Cmd
	for _, f := range files {
		cmds = append(cmds, m.attachFile(f, true))
	}
	return tea.Batch(cmds...)
}

// pathCompletedMsg brings the completion of an @path word.
type pathCompletedMsg struct {
	word, completion string
	isFile           bool
}

// completeMention completes the @path word at the end of the input, as a
// shell completes a file name: the longest common prefix of the names in
// its directory, with a slash after a directory.
func (m *Model) completeMention(word string) tea.Cmd {
	home := m.opts.HomeDir
	return func() tea.Msg {
		typed := word[1:]
		path := expandHome(typed, home)
		dir, prefix := filepath.Split(path)
		listDir := dir
		if listDir == "" {
			listDir = "."
		}
		entries, err := os.ReadDir(listDir)
		if err != nil {
			return nil
		}
		var names []string
		isDir := map[string]bool{}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) && (prefix != "" || !strings.HasPrefix(e.Name(), ".")) {
				names = append(names, e.Name())
				isDir[e.Name()] = e.IsDir()
			}
			if len(names) > 1000 {
				break // bounded: a huge directory completes on what was seen
			}
		}
		if len(names) == 0 {
			return nil
		}
		common := names[0]
		for _, n := range names[1:] {
			for !strings.HasPrefix(n, common) {
				common = common[:len(common)-1]
			}
		}
		done := len(names) == 1
		if done && isDir[common] {
			common += "/"
		}
		completion := "@" + typed[:len(typed)-len(prefix)] + common
		return pathCompletedMsg{word: word, completion: completion, isFile: done && !isDir[names[0]]}
	}
}

func (m *Model) pathCompleted(msg pathCompletedMsg) tea.Cmd {
	v := m.input.Value()
	if !strings.HasSuffix(v, msg.word) {
		return nil // the user typed on
	}
	m.input.SetValue(strings.TrimSuffix(v, msg.word) + msg.completion)
	if msg.isFile {
		return m.attachFile(msg.completion[1:], false)
	}
	return nil
}

// lastMention is the input's last word when it is an @path being typed.
func lastMention(text string) (string, bool) {
	i := strings.LastIndexAny(text, " \n\t")
	w := text[i+1:]
	return w, len(w) > 1 && w[0] == '@'
}
