package tui

import "github.com/charmbracelet/bubbles/key"

// KeyMap lists every binding with its help text; the help overlay is
// generated from it, so what the overlay says is what the keys do.
type KeyMap struct {
	Send        key.Binding
	Newline     key.Binding
	Stop        key.Binding
	Quit        key.Binding
	Regenerate  key.Binding
	EditLast    key.Binding
	Complete    key.Binding
	ToggleThink key.Binding
	Copy        key.Binding
	Backend     key.Binding
	Profile     key.Binding
	Sessions    key.Binding
	NewChat     key.Binding
	Help        key.Binding
	PageUp      key.Binding
	PageDown    key.Binding
	Bottom      key.Binding
	HistoryPrev key.Binding
	HistoryNext key.Binding
}

// DefaultKeyMap is bonsai's key layout. Keys avoid those the textarea uses for
// editing (ctrl+a/e/k/u/w, arrows, alt+b/f) so that typing never triggers a
// command.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Send:        key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "send")),
		Newline:     key.NewBinding(key.WithKeys("ctrl+j", "alt+enter", "shift+enter"), key.WithHelp("ctrl+j / shift+enter", "new line")),
		Stop:        key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "stop the reply (kept, marked stopped)")),
		Quit:        key.NewBinding(key.WithKeys("ctrl+c", "ctrl+d"), key.WithHelp("ctrl+c ×2 / ctrl+d", "quit (ctrl+c stops a reply first)")),
		Regenerate:  key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "regenerate the last reply")),
		EditLast:    key.NewBinding(key.WithKeys("ctrl+x"), key.WithHelp("ctrl+x", "edit the last prompt")),
		Complete:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "complete a /command")),
		ToggleThink: key.NewBinding(key.WithKeys("ctrl+t"), key.WithHelp("ctrl+t", "show / fold thinking")),
		Copy:        key.NewBinding(key.WithKeys("ctrl+y"), key.WithHelp("ctrl+y", "copy the last reply")),
		Backend:     key.NewBinding(key.WithKeys("ctrl+b", "f2"), key.WithHelp("ctrl+b / f2", "backend panel")),
		Profile:     key.NewBinding(key.WithKeys("ctrl+p", "f3"), key.WithHelp("ctrl+p / f3", "profiling panel")),
		Sessions:    key.NewBinding(key.WithKeys("ctrl+s", "f4"), key.WithHelp("ctrl+s / f4", "sessions")),
		NewChat:     key.NewBinding(key.WithKeys("ctrl+n"), key.WithHelp("ctrl+n", "new chat")),
		Help:        key.NewBinding(key.WithKeys("f1", "ctrl+g"), key.WithHelp("f1 / ctrl+g", "this help")),
		PageUp:      key.NewBinding(key.WithKeys("pgup", "alt+up"), key.WithHelp("pgup / alt+↑", "scroll up")),
		PageDown:    key.NewBinding(key.WithKeys("pgdown", "alt+down"), key.WithHelp("pgdn / alt+↓", "scroll down")),
		Bottom:      key.NewBinding(key.WithKeys("ctrl+end", "alt+end"), key.WithHelp("ctrl+end", "jump to the latest")),
		HistoryPrev: key.NewBinding(key.WithKeys("up"), key.WithHelp("↑ (first line)", "previous prompt")),
		HistoryNext: key.NewBinding(key.WithKeys("down"), key.WithHelp("↓ (last line)", "next prompt")),
	}
}

// helpRows is the order the help overlay lists bindings in.
func (k KeyMap) helpRows() []key.Binding {
	return []key.Binding{
		k.Send, k.Newline, k.HistoryPrev, k.HistoryNext, k.Complete, k.Stop, k.Quit,
		k.Regenerate, k.EditLast, k.ToggleThink, k.Copy, k.Backend, k.Profile,
		k.Sessions, k.NewChat, k.PageUp, k.PageDown, k.Bottom, k.Help,
	}
}
