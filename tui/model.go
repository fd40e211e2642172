// Package tui is bonsai's chat interface: one bubbletea model whose panels
// (status line, conversation, input, backend, profiling, sessions, help)
// are plain structs drawn at a width. It talks to the model only through
// engine.Client, and to disk only from a background goroutine.
package tui

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Options are everything the chat needs from outside; tests fill them with
// fakes.
type Options struct {
	Engine engine.Client
	// Store keeps conversations; nil keeps nothing.
	Store *session.Store
	// Resume is a conversation to continue (from -c or --session).
	Resume *session.Session
	// State is the UI state file's content (open panels, prompt history);
	// StatePath is where changes are written ("" writes nothing).
	State     *config.State
	StatePath string
	// Think starts with thinking on; System is the system prompt of new chats.
	Think  bool
	System string
	// Sampling returns the sampler settings for one reply from the model's
	// recommendation (ModelInfo.Sampling; a fresh seed each time when the
	// seed is random); nil leaves the engine's defaults.
	Sampling  func(model engine.Sampling) engine.Sampling
	MaxTokens int
	// SettingOrigin says where the configuration's value of a /set name
	// ("temperature", "seed", ...) comes from ("file:PATH:LINE", "env
	// BONSAI_TEMP", "flag --temp"); "" when the configuration leaves it
	// to the model. nil: nothing is configured.
	SettingOrigin func(name string) string
	ModelPath     string
	// Dark says the terminal background is dark; Profile is its colour
	// profile (termenv.Ascii under NO_COLOR).
	Dark    bool
	Profile termenv.Profile
	// Clipboard copies text; nil copies with OSC 52 only, to stdout
	// (SystemClipboard(ProcessClipboardEnv()) adds the system's clipboard).
	Clipboard Clipboard
	// Keys overrides DefaultKeyMap.
	Keys *KeyMap
	// ExportDir is where /export writes a file given no path or a
	// relative one ("" = the current directory); HomeDir is what a leading
	// ~ in a path stands for ("" leaves ~ alone).
	ExportDir string
	HomeDir   string
	// ModelsDir is where the /model picker looks for downloaded models
	// ("": hub.DefaultDir()).
	ModelsDir string
	// BuiltinModel is the path the built-in model goes by ("(embedded)
	// NAME"), which /model and its picker offer beside the files; the
	// engine's opener must know it. Empty: there is none.
	BuiltinModel string
	// Notices are shown at the top of the transcript (configuration
	// warnings, a session that could not be resumed).
	Notices []string
	// Now is the clock (tests).
	Now func() time.Time
}

// profiler is an engine whose per-phase timing can be switched on and off.
type profiler interface{ SetProfiling(on bool) }

// overlay is what covers the conversation, if anything.
type overlay int

const (
	overlayNone overlay = iota
	overlayHelp
	overlaySessions
	overlayModels
)

// Panel names as stored in the UI state file.
const (
	panelBackend = "backend"
	panelProfile = "profile"
)

// Model is the root bubbletea model.
type Model struct {
	opts   Options
	eng    engine.Client
	styles *Styles
	keys   KeyMap
	md     *markdownRenderer

	width, height int

	conv     *conversation
	input    input
	status   statusLine
	backend  backendPanel
	prof     profilePanel
	sessions sessionList
	picker   modelPicker

	overlay     overlay
	helpOffset  int
	showBackend bool
	showProfile bool

	info         *engine.ModelInfo
	modelPath    string // the model replies come from, as stored with them
	loadingModel string // a /model being loaded, "" when none
	think        bool
	system       string
	title        string
	sessionID    int64 // the stored session shown, 0 before the first save
	generating   bool
	// attachments go with the next message (/file, @path); a message
	// naming files waits in sendAfterAttach for the mentions being read.
	attachments     []attachment
	sendAfterAttach string
	mentions        int

	// overrides are this chat's /set values, saved with its session.
	overrides session.Settings
	// initCmd is work New leaves for Init (reading a resumed chat's settings).
	initCmd tea.Cmd
	// reply is the numbers of the reply streaming (or last finished): zero
	// until its first Stats, so that a reply that fails at once never shows
	// the one before's.
	reply engine.Stats
	// systemSaved: the transcript's system prompt (if any) is in the store.
	systemSaved bool
	// pending holds streamed text not yet drawn (flushed once per frame).
	pendingThink, pendingText strings.Builder
	ticking                   bool

	noteID      int
	quitArmedAt time.Time // ctrl+c pressed once while idle

	// editing is the turn an edit (ctrl+x) took out of view: it leaves the
	// store only when the edited prompt is sent, and esc puts it back.
	editing *pendingEdit

	// The context's state in this chat: messages the model no longer sees
	// (engine.ContextTrimmed), and whether the user was told it is filling.
	trimmed    int
	warnedFull bool

	bg         *background
	save       *saver
	retryArmed bool // a retry of unsaved messages is scheduled
	state      config.State
	quit       bool
}

// New builds the chat. Call Close after the program ends.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Clipboard == nil {
		opts.Clipboard = SystemClipboard(ClipboardEnv{Terminal: os.Stdout,
			LookPath: func(string) (string, error) { return "", exec.ErrNotFound }})
	}
	styles := DefaultStyles()
	keys := DefaultKeyMap()
	if opts.Keys != nil {
		keys = *opts.Keys
	}
	md := newMarkdownRenderer(opts.Profile, opts.Dark)
	m := &Model{
		opts:      opts,
		eng:       opts.Engine,
		styles:    &styles,
		keys:      keys,
		md:        md,
		conv:      newConversation(&styles, md),
		think:     opts.Think,
		system:    opts.System,
		bg:        newBackground(),
		modelPath: opts.ModelPath,
	}
	m.input = newInput(m.styles)
	m.save = &saver{store: opts.Store, bg: m.bg}
	if opts.State != nil {
		m.state = *opts.State
		m.showBackend = m.state.Panels[panelBackend]
		m.showProfile = m.state.Panels[panelProfile]
		m.input.History(m.state.History)
	}
	if m.state.Panels == nil {
		m.state.Panels = map[string]bool{}
	}
	if opts.Resume != nil {
		m.initCmd = m.loadSession(opts.Resume)
	} else if m.system != "" {
		m.conv.add(entry{kind: entrySystem, content: m.system})
	}
	for _, n := range opts.Notices {
		m.conv.Notice(n)
	}
	return m
}

// Close stops the background writer after it has saved everything queued.
func (m *Model) Close() {
	m.flushPending()
	m.save.Close(m.reply)
	m.bg.Close()
}

// Init starts listening to the engine and the background writer.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(waitForEngine(m.eng.Events()), waitForBackground(m.bg.out), m.input.ta.Focus(), m.initCmd)
}

// Update is the only place the model changes.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	m.layout()
	if m.quit {
		return m, tea.Quit
	}
	return m, cmd
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return nil
	case engineMsg:
		return m.onEngine(msg)
	case modelResolvedMsg:
		return m.modelResolved(msg)
	case modelListMsg:
		return m.modelsListed(msg)
	case settingsLoadedMsg:
		return m.settingsLoaded(msg)
	case attachedMsg:
		return m.attached(msg)
	case contextMeasuredMsg:
		m.contextMeasured(msg)
		return nil
	case pathCompletedMsg:
		return m.pathCompleted(msg)
	case frameMsg:
		m.ticking = false
		start := time.Now()
		m.flushPending()
		if m.generating {
			m.ticking = true
			return frameTickAfter(time.Since(start))
		}
		return nil
	case noteExpiredMsg:
		if msg.id == m.noteID {
			m.status.note = ""
		}
		return nil
	case saveStateMsg:
		return tea.Batch(m.onSaveState(msg), waitForBackground(m.bg.out))
	case signalMsg:
		return m.onSignal()
	case retrySaveMsg:
		m.retryArmed = false
		m.save.Retry()
		return nil
	case saveErrMsg:
		return tea.Batch(m.notify(msg.err.Error(), true), waitForBackground(m.bg.out))
	case sessionsListedMsg, sessionLoadedMsg, sessionChangedMsg, sessionsSearchedMsg:
		return m.onSessionMsg(msg)
	case copiedMsg:
		if msg.err != nil {
			return m.notify("copy failed: "+msg.err.Error(), true)
		}
		return m.notify(fmt.Sprintf("copied %s %s", msg.what, msg.how), false)
	case exportedMsg:
		if msg.err != nil {
			m.conv.Error("export failed: " + msg.err.Error())
			return nil
		}
		return m.notify("exported to "+msg.path, false)
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			m.conv.ScrollUp(3)
		case tea.MouseButtonWheelDown:
			m.conv.ScrollDown(3)
		}
		return nil
	case tea.KeyMsg:
		return m.onKey(msg)
	}
	// Shift+Enter arrives from terminals with the kitty or modifyOtherKeys
	// protocols as a CSI sequence bubbletea v1 does not name.
	if s, ok := msg.(fmt.Stringer); ok && isShiftEnter(s.String()) {
		m.input.Newline()
	}
	return nil
}

// isShiftEnter recognises Shift+Enter sent as CSI 13;2u or CSI 27;2;13~.
func isShiftEnter(s string) bool {
	return s == "?CSI[49 51 59 50 117]?" || s == "?CSI[50 55 59 50 59 49 51 126]?"
}

// retrySaveMsg: time to try the unsaved messages again.
type retrySaveMsg struct{}

// onSaveState shows how saving stands: unsaved messages stay on the status
// line, and are retried, until the database has them.
func (m *Model) onSaveState(msg saveStateMsg) tea.Cmd {
	var cmds []tea.Cmd
	if in := msg.created; in != nil {
		// A new session has no title yet (the store takes it from the first
		// prompt, as the UI already did).
		if in.Title != "" {
			m.title = in.Title
		}
		m.sessionID = in.ID
		if b, ok := m.eng.(interface{ BindSession(int64) }); ok {
			b.BindSession(in.ID) // the engine saves the conversation's state under it
		}
		m.sessions.current = in.ID
		m.state.LastSession = in.ID
		if len(m.overrides) > 0 {
			m.saveSettings()
		}
	}
	if msg.notice != "" {
		m.conv.Notice(msg.notice)
	}
	was := m.status.unsaved
	m.status.unsaved = ""
	if msg.unsaved > 0 {
		m.status.unsaved = fmt.Sprintf("⚠ %d unsaved (retrying): %v", msg.unsaved, msg.err)
		if !m.retryArmed {
			m.retryArmed = true
			cmds = append(cmds, tea.Tick(saveRetryEvery, func(time.Time) tea.Msg { return retrySaveMsg{} }))
		}
	} else if was != "" {
		cmds = append(cmds, m.notify("saved", false))
	}
	return tea.Batch(cmds...)
}

// onEngine applies a batch of engine events.
func (m *Model) onEngine(msg engineMsg) tea.Cmd {
	var cmds []tea.Cmd
	for _, ev := range msg.events {
		cmds = append(cmds, m.onEvent(ev))
	}
	if msg.closed {
		m.flushPending()
		if m.generating {
			m.finishReply("stopped", m.reply)
		}
		if m.status.phase != phaseFailed {
			m.status.phase = phaseFailed
			m.conv.Error("the engine has stopped; restart bonsai to continue")
		}
		return tea.Batch(cmds...)
	}
	cmds = append(cmds, waitForEngine(m.eng.Events()))
	return tea.Batch(cmds...)
}

func (m *Model) onEvent(ev engine.Event) tea.Cmd {
	switch ev := ev.(type) {
	case engine.LoadProgress:
		if m.status.phase != phaseFailed {
			m.status.phase = phaseLoading
		}
		m.status.load = ev
		m.backend.load = ev
	case engine.Loaded:
		info := ev.Info
		// A remote server names its model: drawn in the header and panels.
		info.Name, info.Variant = printableLine(info.Name), printableLine(info.Variant)
		if m.info != nil {
			// A new KV cache: the last reply's numbers are the old one's.
			m.status.hasStats = false
			m.status.stats = engine.Stats{}
			m.prof.reset() // the old model's, or backend's, timings
		}
		if info.Path != "" && !strings.HasPrefix(info.Path, "(embedded)") && (len(m.state.RecentModels) == 0 || m.state.RecentModels[0] != info.Path) {
			m.state.AddRecentModel(info.Path)
			m.saveState()
		}
		if m.loadingModel != "" {
			m.loadingModel = ""
			m.modelPath = info.Path
			m.status.note = "" // "loading …" is over; the transcript says what came of it
			m.conv.Notice(fmt.Sprintf("Now running %s: %s, %d-token context on %s. The conversation is read again on the next reply.",
				modelLabel(&info), info.Path, info.ContextSize, info.Backend))
		}
		m.info = &info
		m.status.info = &info
		m.backend.info = &info
		m.backend.switching = ""
		m.backend.lastErr = ""
		m.status.phase = phaseReady
		if m.generating {
			m.status.phase = phaseGenerating
		}
		return m.measureContext()
	case engine.PrefillProgress:
		m.status.prefill = ev
	case engine.Token:
		if ev.Thinking {
			m.pendingThink.WriteString(ev.Text)
		} else {
			m.pendingText.WriteString(ev.Text)
		}
		if !m.ticking && m.generating {
			m.ticking = true
			return frameTick()
		}
	case engine.Stats:
		m.reply = ev
		m.status.stats = ev
		m.status.hasStats = true
	case engine.ProfileSample:
		m.prof.add(ev)
	case engine.ContextTrimmed:
		m.contextTrimmed(ev)
	case engine.Done:
		m.flushPending()
		m.reply = ev.Stats
		m.status.stats = ev.Stats
		m.status.hasStats = true
		m.finishReply(ev.Reason, ev.Stats)
		m.warnContextFilling(ev.Stats)
	case engine.Notice:
		m.conv.Notice(ev.Text)
		return m.notify(ev.Text, false)
	case engine.Error:
		return m.onEngineError(ev)
	}
	return nil
}

func (m *Model) onEngineError(ev engine.Error) tea.Cmd {
	text := "engine error"
	if ev.Err != nil {
		text = printable(ev.Err.Error()) // it may quote a remote server
	}
	m.flushPending()
	switch {
	case ev.Fatal:
		if m.generating {
			m.finishReply("stopped", m.reply)
		}
		m.status.phase = phaseFailed
		m.conv.Error(text)
	case ev.NoModel:
		// The first load failed (or a switch made while none is loaded):
		// the engine still switches, so say how to get a model.
		if m.generating {
			m.finishReply("error", m.reply)
		}
		m.loadingModel, m.backend.switching, m.backend.lastErr = "", "", text
		m.status.phase = phaseNoModel
		m.conv.Error(text + " — " + noModelHelp)
	case m.loadingModel != "":
		m.loadingModel = ""
		m.conv.Error(text + " (still running " + modelLabel(m.info) + ")")
		m.status.phase = phaseReady
	case m.backend.switching != "":
		m.backend.lastErr = text
		m.backend.switching = ""
		m.conv.Error(text + " (still on " + m.backendName() + ")")
		m.status.phase = phaseReady
	default:
		if m.generating {
			m.finishReply("error", m.reply)
		} else if m.info != nil {
			m.status.phase = phaseReady
		}
		m.conv.Error(text)
	}
	return m.notify(text, true)
}

func (m *Model) backendName() string {
	if m.info == nil {
		return "the old backend"
	}
	return m.info.Backend
}

// flushPending moves buffered tokens into the transcript and the saver.
func (m *Model) flushPending() {
	if m.pendingThink.Len() == 0 && m.pendingText.Len() == 0 {
		return
	}
	think, text := m.pendingThink.String(), m.pendingText.String()
	m.pendingThink.Reset()
	m.pendingText.Reset()
	if !m.generating {
		return
	}
	m.conv.AppendReply(think, text)
	m.save.AppendReply(text, think)
}

func (m *Model) finishReply(reason string, stats engine.Stats) {
	if !m.generating {
		return
	}
	m.generating = false
	st := stats
	m.conv.FinishReply(reason, &st)
	m.save.FinishReply(stats, reason == "stopped")
	if m.status.phase == phaseGenerating || m.status.phase == phaseStopping {
		m.status.phase = phaseReady
	}
	m.status.prefill = engine.PrefillProgress{}
}

// meta describes what produces the messages now, for the store.
func (m *Model) meta() session.Meta {
	meta := session.Meta{Model: m.modelPath}
	if m.info != nil {
		meta.Variant = m.info.Variant
		meta.Backend = m.info.Backend
		if meta.Model == "" {
			meta.Model = m.info.Path
		}
	}
	return meta
}

// canGenerate says whether a new reply may start, with the reason if not.
func (m *Model) canGenerate() (bool, string) {
	switch {
	case m.status.phase == phaseFailed:
		return false, "the engine has stopped"
	case m.status.phase == phaseNoModel:
		return false, noModelHelp
	case m.generating:
		return false, "a reply is still streaming (esc stops it)"
	case m.info == nil || m.status.phase == phaseLoading:
		return false, "the model is still loading"
	}
	return true, ""
}

// send adds the user's message and asks for a reply.
func (m *Model) send(text string) tea.Cmd {
	if ok, why := m.canGenerate(); !ok {
		return m.notify("not sent: "+why, true)
	}
	m.commitEdit()
	m.input.Remember(text)
	m.state.AddHistory(text)
	// At once, not at quit: a process killed later keeps its prompts.
	m.saveState()
	m.input.SetValue("")
	content := withAttachments(text, m.attachments)
	m.attachments = nil
	msg := chat.Message{Role: chat.RoleUser, Content: content}
	// The system prompt is stored with the first message, so that a chat
	// never used leaves no empty session behind.
	if !m.systemSaved && len(m.conv.entries) > 0 && m.conv.entries[0].kind == entrySystem {
		m.save.Add(chat.Message{Role: chat.RoleSystem, Content: m.conv.entries[0].content}, m.meta())
	}
	m.systemSaved = true
	m.conv.add(entry{kind: entryUser, content: content})
	m.save.Add(msg, m.meta())
	if m.title == "" {
		m.title = session.MakeTitle(text)
	}
	m.conv.Bottom()
	return m.generate()
}

// generate starts a reply to the transcript as it stands.
func (m *Model) generate() tea.Cmd {
	r := m.replySettings()
	req := engine.GenerateRequest{Messages: m.conv.Messages(), Think: m.think, MaxTokens: r.maxTokens, Session: m.sessionID}
	if m.opts.Sampling != nil || len(m.overrides) > 0 {
		req.Sampling = &r.sampling
	}
	m.generating = true
	m.status.phase = phaseGenerating
	// The last reply's speed goes; its context gauge stays until this
	// reply's first numbers, so that it never reads 0 while a prompt is read.
	m.status.hasStats = false
	m.reply = engine.Stats{}
	m.status.prefill = engine.PrefillProgress{}
	m.conv.StartReply()
	m.save.BeginReply(m.meta())
	m.eng.Generate(req)
	m.ticking = true
	return frameTick()
}

// regenerate replaces the last reply with a new one.
func (m *Model) regenerate() tea.Cmd {
	if m.generating {
		return m.notify("a reply is still streaming (esc stops it)", true)
	}
	m.cancelEdit()
	last := m.conv.LastReply()
	if last < 0 || last < m.conv.LastUser() {
		return m.notify("no reply to regenerate", true)
	}
	if ok, why := m.canGenerate(); !ok {
		return m.notify(why, true)
	}
	m.truncateAt(last)
	return m.generate()
}

// pendingEdit is a turn being edited: the entries taken out of view
// (the prompt, its reply and what followed) and how many stored messages
// come before them.
type pendingEdit struct {
	removed []entry
	stored  int
}

// editLast puts the last prompt in the input and takes it and its reply out
// of view. The store keeps them until the edited prompt is sent
// (commitEdit); esc puts them back (cancelEdit), and quitting meanwhile
// loses nothing.
func (m *Model) editLast() tea.Cmd {
	if m.generating {
		return m.notify("a reply is still streaming (esc stops it)", true)
	}
	m.cancelEdit()
	last := m.conv.LastUser()
	if last < 0 {
		return m.notify("no prompt to edit", true)
	}
	text := m.conv.entries[last].content
	m.editing = &pendingEdit{removed: slices.Clone(m.conv.entries[last:]), stored: m.storedBefore(last)}
	m.conv.Truncate(last)
	m.input.SetValue(text)
	return m.notify("editing the last prompt: enter sends it in place of the old turn, esc puts it back", false)
}

// cancelEdit puts an edited turn back as it was; it reports whether there
// was one.
func (m *Model) cancelEdit() bool {
	if m.editing == nil {
		return false
	}
	m.conv.Restore(m.editing.removed)
	m.editing = nil
	m.input.SetValue("")
	return true
}

// commitEdit drops an edited turn from the store: its replacement is
// being sent.
func (m *Model) commitEdit() {
	if m.editing == nil {
		return
	}
	m.save.TruncateTo(m.editing.stored)
	m.editing = nil
}

// storedBefore counts the transcript entries before i that the store keeps.
func (m *Model) storedBefore(i int) int {
	stored := 0
	for _, e := range m.conv.entries[:i] {
		if e.kind == entryUser || e.kind == entryAssistant || e.kind == entrySystem {
			stored++
		}
	}
	return stored
}

// truncateAt drops transcript entries from i on, in the store too.
func (m *Model) truncateAt(i int) {
	stored := m.storedBefore(i)
	m.conv.Truncate(i)
	m.save.TruncateTo(stored)
}

// stop ends the reply being generated; the partial reply stays.
func (m *Model) stop() tea.Cmd {
	if !m.generating {
		return nil
	}
	m.eng.Stop()
	m.status.phase = phaseStopping
	return nil
}

// newChat starts over: a fresh transcript, KV cache and session.
func (m *Model) newChat(system string, note string) tea.Cmd {
	if m.generating {
		m.eng.Stop()
		m.flushPending()
		m.finishReply("stopped", m.reply)
	}
	m.editing = nil // the session keeps the turn: nothing was sent in its place
	m.conv.Clear()
	m.eng.Reset()
	m.save.Detach()
	m.title = ""
	m.sessionID = 0
	m.system = system
	m.systemSaved = false
	if system != "" {
		m.conv.add(entry{kind: entrySystem, content: system})
	}
	m.status.hasStats = false
	m.status.stats = engine.Stats{}
	m.resetContextNotes()
	return m.notify(note, false)
}

// notify shows a transient note in the status line.
func (m *Model) notify(text string, isErr bool) tea.Cmd {
	if text == "" {
		return nil
	}
	m.noteID++
	m.status.note = text
	m.status.noteErr = isErr
	if isErr && m.width > 0 && lipgloss.Width(text) > m.width-noteRoomReserve && !m.conv.lastErrorIs(text) {
		// Cut to the status line and gone in seconds, a long error would
		// be lost: the transcript keeps it whole.
		m.conv.Error(text)
	}
	return expireNote(m.noteID)
}

// noteRoomReserve is the status line's width taken before a note: the badge
// and a separator ("◌ loading 100%" is the widest badge).
const noteRoomReserve = 20

// togglePanel flips a panel and remembers it in the state file.
func (m *Model) togglePanel(name string) tea.Cmd {
	switch name {
	case panelBackend:
		m.showBackend = !m.showBackend
		m.state.Panels[name] = m.showBackend
	case panelProfile:
		m.showProfile = !m.showProfile
		m.state.Panels[name] = m.showProfile
		// Timing every phase costs a little, so it runs only while shown.
		if p, ok := m.eng.(profiler); ok {
			p.SetProfiling(m.showProfile)
		}
	case "":
		return m.notify("/panel backend or /panel profile (ctrl+b, ctrl+p)", true)
	default:
		return m.notify(fmt.Sprintf("no panel %q: /panel backend or /panel profile", name), true)
	}
	m.saveState()
	return nil
}

// saveState writes the UI state file in the background.
func (m *Model) saveState() {
	if m.opts.StatePath == "" {
		return
	}
	st := config.State{
		Panels:       map[string]bool{},
		LastSession:  m.state.LastSession,
		History:      append([]string(nil), m.state.History...),
		RecentModels: append([]string(nil), m.state.RecentModels...),
	}
	for k, v := range m.state.Panels {
		st.Panels[k] = v
	}
	path := m.opts.StatePath
	m.bg.Do(func() tea.Msg {
		if err := st.Save(path); err != nil {
			return saveErrMsg{err}
		}
		return nil
	})
}

// onKey handles a key: overlays first, then global keys, then the input.
func (m *Model) onKey(msg tea.KeyMsg) tea.Cmd {
	interrupt := key.Matches(msg, m.keys.Interrupt)
	if !interrupt {
		m.quitArmedAt = time.Time{}
	}
	switch m.overlay {
	case overlayHelp:
		switch {
		case msg.Type == tea.KeyEsc || key.Matches(msg, m.keys.Help) || msg.String() == "q":
			m.overlay = overlayNone
		case msg.Type == tea.KeyUp:
			m.helpOffset = max(m.helpOffset-1, 0)
		case msg.Type == tea.KeyDown:
			m.helpOffset++
		case msg.Type == tea.KeyPgUp:
			m.helpOffset = max(m.helpOffset-10, 0)
		case msg.Type == tea.KeyPgDown:
			m.helpOffset += 10
		}
		if !interrupt {
			return nil
		}
	case overlaySessions:
		if !interrupt {
			return m.sessionsKey(msg)
		}
	case overlayModels:
		if !interrupt {
			return m.pickerKey(msg)
		}
	}
	k := m.keys
	switch {
	case interrupt:
		if m.generating {
			return m.stop()
		}
		if m.input.Value() != "" {
			return m.clearInput()
		}
		if !m.quitArmedAt.IsZero() && m.opts.Now().Sub(m.quitArmedAt) < 2*time.Second {
			return m.requestQuit()
		}
		m.quitArmedAt = m.opts.Now()
		return m.notify("press ctrl+c again to quit", false)
	case key.Matches(msg, k.Quit) && m.input.Value() == "" && !m.generating:
		return m.requestQuit()
	case key.Matches(msg, k.Stop):
		if m.generating {
			return m.stop()
		}
		if m.cancelEdit() {
			return m.notify("edit cancelled: the turn is back as it was", false)
		}
		return nil
	case key.Matches(msg, k.Newline):
		m.input.Newline()
		return nil
	case key.Matches(msg, k.Send):
		return m.submit()
	case key.Matches(msg, k.Complete):
		if w, ok := lastMention(m.input.Value()); ok {
			return m.completeMention(w)
		}
		if c := complete(m.input.Value()); c != m.input.Value() {
			m.input.SetValue(c)
		}
		return nil
	case key.Matches(msg, k.Regenerate):
		return m.regenerate()
	case key.Matches(msg, k.EditLast):
		return m.editLast()
	case key.Matches(msg, k.ToggleThink):
		if !m.conv.HasThinking() {
			return m.notify("no thinking in this chat to show (/think on lets the model reason first)", false)
		}
		m.conv.ToggleThinking()
		return nil
	case key.Matches(msg, k.Copy):
		return m.copyReply("")
	case key.Matches(msg, k.Backend):
		return m.togglePanel(panelBackend)
	case key.Matches(msg, k.Profile):
		return m.togglePanel(panelProfile)
	case key.Matches(msg, k.Sessions):
		return m.openSessions()
	case key.Matches(msg, k.NewChat):
		return m.newChat(m.opts.System, "new chat")
	case key.Matches(msg, k.Help), isHelpQuestion(msg) && m.input.Value() == "":
		m.overlay = overlayHelp
		return nil
	case key.Matches(msg, k.PageUp):
		m.conv.ScrollUp(max(m.conv.height-2, 1))
		return nil
	case key.Matches(msg, k.PageDown):
		m.conv.ScrollDown(max(m.conv.height-2, 1))
		return nil
	case key.Matches(msg, k.Bottom):
		m.conv.Bottom()
		return nil
	case key.Matches(msg, k.HistoryPrev) && m.input.OnFirstLine():
		m.input.Prev()
		return nil
	case key.Matches(msg, k.HistoryNext) && m.input.OnLastLine():
		m.input.Next()
		return nil
	}
	return m.input.Update(msg)
}

// clearInput empties the input (ctrl+c on text, as in ollama and aichat),
// giving up an edit in progress; the text stays one ↑ away.
func (m *Model) clearInput() tea.Cmd {
	m.quitArmedAt = time.Time{}
	if m.cancelEdit() {
		return m.notify("edit cancelled: the turn is back as it was", false)
	}
	m.input.Remember(m.input.Value())
	m.input.SetValue("")
	return m.notify("input cleared (↑ brings it back; ctrl+c on an empty input quits)", false)
}

// signalMsg: the process got a signal that ends it (SIGHUP, SIGTERM,
// SIGINT from outside: the terminal closed, a kill, a shutdown).
type signalMsg struct{ sig os.Signal }

// onSignal saves everything and quits: a streaming reply is stored whole,
// with its numbers, marked interrupted.
func (m *Model) onSignal() tea.Cmd {
	if m.generating {
		m.eng.Stop()
		m.flushPending()
		m.generating = false
		st := m.reply
		m.conv.FinishReply("interrupted", &st)
		m.save.InterruptReply(st)
	}
	m.saveState()
	m.quit = true
	return nil
}

// isHelpQuestion: "?" typed on an empty input asks for help (typed anywhere
// else, it is text).
func isHelpQuestion(msg tea.KeyMsg) bool {
	return msg.Type == tea.KeyRunes && len(msg.Runes) == 1 && msg.Runes[0] == '?' && !msg.Paste
}

// requestQuit stops a running reply (kept as stopped) and ends the program.
func (m *Model) requestQuit() tea.Cmd {
	if m.generating {
		m.eng.Stop()
		m.flushPending()
		m.finishReply("stopped", m.reply)
	}
	m.saveState()
	m.quit = true
	return nil
}

// submit sends the input, or runs it when it is a /command.
func (m *Model) submit() tea.Cmd {
	text := strings.TrimSpace(m.input.Value())
	if text == "" {
		return nil
	}
	if name, arg, ok := parseSlash(text); ok {
		m.input.Remember(text)
		m.input.SetValue("")
		return m.runSlash(name, arg)
	}
	if strings.HasPrefix(text, "//") {
		text = text[1:]
	}
	return m.sendWithMentions(text)
}

// View draws the screen.
func (m *Model) View() string {
	if m.width == 0 || m.height == 0 {
		return ""
	}
	if m.quit {
		return ""
	}
	st := m.styles
	top := header(st, m.width, m.title, m.info, m.thinkLabel())
	main := m.mainView()
	if v := m.input.Value(); m.overlay == overlayNone && strings.HasPrefix(v, "/") {
		main = overlayBottom(main, slashPopup(st, v, m.width, min(strings.Count(main, "\n"), maxPopupRows)))
	}
	hint := m.hintLine()
	sep := st.Dim.Render(strings.Repeat("─", m.width))
	// Plain joins: every part is already at most the width, and measuring
	// each line again (lipgloss.JoinVertical) is most of a frame's cost.
	return strings.Join([]string{top, main, hint, sep, m.input.View(),
		m.status.View(st, m.width, m.conv.Following())}, "\n")
}

func (m *Model) thinkLabel() string {
	if m.think {
		return "think on"
	}
	return "think off"
}

// hintLine is the line above the input: command completion while a command
// is typed, otherwise the main keys.
func (m *Model) hintLine() string {
	st := m.styles
	if h := completionHint(m.input.Value()); h != "" {
		return truncate(st.HelpKey.Render("tab")+" "+st.HelpDesc.Render(h), m.width)
	}
	if len(m.attachments) > 0 {
		return truncate(st.HelpKey.Render("attached")+" "+st.HelpDesc.Render(m.attachmentSummary()+" · goes with your next message · /file none removes"), m.width)
	}
	var parts []string
	if m.generating {
		parts = append(parts, "esc stop")
	} else {
		parts = append(parts, "enter send", "ctrl+j newline", "ctrl+r regen")
	}
	parts = append(parts, "ctrl+b backend", "ctrl+p profile", "f1 help")
	return truncate(st.Dim.Render(strings.Join(parts, " · ")), m.width)
}
