package tui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/session"
	tea "github.com/charmbracelet/bubbletea"
)

// runSlash runs a /command typed in the input.
func (m *Model) runSlash(name, arg string) tea.Cmd {
	switch name {
	case "new":
		return m.newChat(m.opts.System, "new chat")
	case "clear":
		return m.newChat(m.system, "cleared: a new chat with the same system prompt")
	case "sessions":
		return m.openSessions()
	case "system":
		switch arg {
		case "":
			return m.showSystem()
		case "none":
			return m.setSystem("")
		}
		return m.setSystem(arg)
	case "think":
		switch arg {
		case "on":
			m.think = true
		case "off":
			m.think = false
		case "":
			m.think = !m.think
		default:
			return m.notify("/think on or /think off", true)
		}
		return m.notify("thinking "+map[bool]string{true: "on", false: "off"}[m.think]+" from the next reply", false)
	case "backend":
		return m.switchBackend(arg)
	case "model":
		if arg == "" {
			return m.openPicker()
		}
		return m.switchModel(arg)
	case "export":
		return m.export(arg)
	case "copy":
		return m.copyReply(arg)
	case "regen", "regenerate":
		return m.regenerate()
	case "edit":
		return m.editLast()
	case "profile":
		return m.togglePanel(panelProfile)
	case "panel":
		return m.togglePanel(arg)
	case "file":
		return m.fileCommand(arg)
	case "set":
		return m.setSetting(arg)
	case "show":
		return m.showSettings()
	case "help":
		m.overlay = overlayHelp
		return nil
	case "quit", "exit", "bye":
		return m.requestQuit()
	}
	return m.notify(fmt.Sprintf("unknown command /%s (/help lists them; // sends a message starting with /)", name), true)
}

// showSystem shows the system prompt the chat runs under.
func (m *Model) showSystem() tea.Cmd {
	if m.system == "" {
		m.conv.Notice("No system prompt. /system TEXT sets one (a chat with turns starts anew under it).")
		return nil
	}
	m.conv.Notice("System prompt: " + m.system + "\n/system TEXT replaces it, /system none removes it.")
	return nil
}

// setSystem changes the system prompt. In an empty chat it simply becomes
// the first message; once the chat has turns, it starts a new chat, since
// the turns so far were answered under the old prompt.
func (m *Model) setSystem(text string) tea.Cmd {
	hasTurns := false
	for _, e := range m.conv.entries {
		if e.kind == entryUser || e.kind == entryAssistant {
			hasTurns = true
			break
		}
	}
	if hasTurns {
		note := "new chat with the system prompt set"
		if text == "" {
			note = "new chat without a system prompt"
		}
		return m.newChat(text, note)
	}
	m.system = text
	m.editing = nil
	m.conv.Clear()
	m.save.Detach()
	m.sessionID = 0
	if text == "" {
		return m.notify("system prompt cleared", false)
	}
	m.systemSaved = false
	m.conv.add(entry{kind: entrySystem, content: text})
	return m.notify("system prompt set", false)
}

func (m *Model) switchBackend(name string) tea.Cmd {
	switch {
	case name == "":
		return m.explainBackend()
	case name == "cpu", name == "gpu", name == "auto":
	case strings.HasPrefix(name, "remote:") && len(name) > len("remote:"):
		// A [[remote]] server of config.toml (the engine is then a
		// remote.Switcher; another engine says it cannot).
	default:
		return m.notify("/backend cpu, /backend gpu, /backend auto or /backend remote:NAME", true)
	}
	if m.generating {
		return m.notify("wait for the reply to finish (or esc) before switching", true)
	}
	if m.info != nil && m.info.Backend == name {
		return m.notify("already on "+name, false)
	}
	m.backend.switching = name
	m.backend.load = emptyLoad
	m.backend.lastErr = ""
	m.status.phase = phaseLoading
	m.status.load = emptyLoad
	m.showBackend = true
	m.eng.SwitchBackend(name)
	if strings.HasPrefix(name, "remote:") {
		return m.notify("connecting to "+name+"; the next reply comes from that server", false)
	}
	return m.notify("reloading the model on "+name+"; the KV cache is rebuilt on the next reply", false)
}

// explainBackend says in the transcript where the model runs and, when
// auto fell back to the CPU, the GPU's whole reason: the panel has one line
// for it.
func (m *Model) explainBackend() tea.Cmd {
	if m.info == nil {
		m.conv.Notice(noModelHelp)
		return nil
	}
	text := fmt.Sprintf("Running on %s (%s).", m.info.Backend, m.info.Adapter)
	if m.info.Fallback != "" {
		text += " Auto chose the CPU because the GPU backend declined: " + m.info.Fallback
	}
	m.conv.Notice(text + "\n/backend cpu, /backend gpu or /backend auto reloads the model on one.")
	m.conv.Bottom()
	return nil
}

// switchModel resolves a model name or path (a file lookup, so in a
// command, not in Update) and asks the engine to load it.
func (m *Model) switchModel(nameOrPath string) tea.Cmd {
	if m.generating {
		return m.notify("wait for the reply to finish (or esc) before switching", true)
	}
	if b := m.opts.BuiltinModel; b != "" && (nameOrPath == b || nameOrPath == builtinName(b)) {
		return func() tea.Msg { return modelResolvedMsg{name: nameOrPath, path: b} }
	}
	dir := m.modelsDir()
	return func() tea.Msg {
		path, err := hub.Resolve(nameOrPath, dir)
		return modelResolvedMsg{name: nameOrPath, path: path, err: err}
	}
}

// modelResolvedMsg carries switchModel's lookup back into Update.
type modelResolvedMsg struct {
	name, path string
	err        error
}

func (m *Model) modelResolved(msg modelResolvedMsg) tea.Cmd {
	if msg.err != nil {
		return m.notify(fmt.Sprintf("model %q: %v", msg.name, msg.err), true)
	}
	m.status.phase = phaseLoading
	m.status.load = emptyLoad
	m.loadingModel = msg.path
	m.eng.SwitchModel(msg.path)
	return m.notify("loading "+msg.path, false)
}

// copyReply copies the last reply, or its Nth fenced code block.
func (m *Model) copyReply(arg string) tea.Cmd {
	i := m.conv.LastReply()
	if i < 0 || m.conv.entries[i].content == "" {
		return m.notify("no reply to copy yet", true)
	}
	content := m.conv.entries[i].content
	if arg == "" {
		return copyCmd(m.opts.Clipboard, content, "the last reply")
	}
	n, err := strconv.Atoi(arg)
	blocks := codeBlocks(content)
	switch {
	case len(blocks) == 0:
		return m.notify("the last reply has no code blocks: /copy alone copies the whole reply", true)
	case err != nil || n < 1 || n > len(blocks):
		return m.notify(fmt.Sprintf("/copy N copies code block N (1 to %d, numbered above each block); /copy alone, the whole reply", len(blocks)), true)
	}
	return copyCmd(m.opts.Clipboard, blocks[n-1], fmt.Sprintf("code block %d", n))
}

// exportedMsg reports /export.
type exportedMsg struct {
	path string
	err  error
}

// export writes the chat to a file: the stored session, as `bonsai export`
// writes it (its times, models and backends), once the saves queued before
// it are done; a chat that keeps nothing exports its transcript. The file's
// extension names the format (.md or .json).
func (m *Model) export(arg string) tea.Cmd {
	if len(m.conv.entries) == 0 {
		return m.notify("nothing to export yet", true)
	}
	path := expandHome(arg, m.opts.HomeDir)
	if path == "" {
		path = exportName(m.title, m.opts.Now())
	}
	format, err := session.FormatOf(path)
	if err != nil {
		return func() tea.Msg { return exportedMsg{path: path, err: err} }
	}
	if !filepath.IsAbs(path) && m.opts.ExportDir != "" {
		path = filepath.Join(m.opts.ExportDir, path)
	}
	transcript := m.transcriptSession()
	write := func() tea.Msg {
		sess := transcript
		if stored := m.save.stored(); stored != nil {
			sess = stored
		}
		return exportTo(sess, format, path, arg == "")
	}
	if m.save.enabled() {
		m.save.bg.Do(write) // after the saves queued before it
		return nil
	}
	return write
}

// stored is the chat's session as the database holds it, nil when there is
// none; it runs on the saver's goroutine.
func (s *saver) stored() *session.Session {
	if !s.enabled() || s.sessionID == 0 {
		return nil
	}
	sess, err := s.store.Load(context.Background(), s.sessionID)
	if err != nil {
		return nil
	}
	return sess
}

// transcriptSession is the chat as the screen holds it, for a chat that
// keeps nothing.
func (m *Model) transcriptSession() *session.Session {
	meta := m.meta()
	sess := &session.Session{Info: session.Info{ID: m.sessionID, Title: m.title, Model: meta.Model,
		Variant: meta.Variant, Backend: meta.Backend, Created: m.opts.Now(), Updated: m.opts.Now()}}
	for _, e := range m.conv.entries {
		mm, ok := e.message()
		if !ok && e.kind != entryAssistant {
			continue
		}
		if e.kind == entryAssistant {
			mm = chat.Message{Role: chat.RoleAssistant, Content: e.content, Thinking: e.thinking}
		}
		t := session.Message{Role: mm.Role, Content: mm.Content, Thinking: mm.Thinking, Stopped: e.stopped}
		if e.stats != nil {
			t.Stats = storedStats(*e.stats)
		}
		sess.Turns = append(sess.Turns, t)
	}
	return sess
}

// exportTo writes sess to path; mkdir makes the exports directory, bonsai's
// own, on first use.
func exportTo(sess *session.Session, format session.Format, path string, mkdir bool) tea.Msg {
	if mkdir {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return exportedMsg{path: path, err: err}
		}
	}
	if err := session.Export(sess, format, path); err != nil {
		// Say which file, not the temporary one the write went through.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", path, pe.Err)
		}
		return exportedMsg{path: path, err: err}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return exportedMsg{path: abs}
}

// expandHome expands a leading ~ (alone or before a slash) to home, as a
// shell would; text without one, or with no home known, is unchanged.
func expandHome(path, home string) string {
	if home == "" || (path != "~" && !strings.HasPrefix(path, "~/")) {
		return path
	}
	return filepath.Join(home, path[1:])
}

// exportName makes a file name from the chat's title and the time.
func exportName(title string, now time.Time) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	slug := strings.Trim(b.String(), "-")
	if slug == "" {
		slug = "chat"
	}
	return fmt.Sprintf("bonsai-%s-%s.md", now.Format("20060102-150405"), slug)
}

// errNoStore is shown when session commands run without a database.
var errNoStore = errors.New("sessions are not being saved (no database)")
