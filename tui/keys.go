package tui

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// KeyMap lists every binding with its help text; the help overlay is
// generated from it, so what the overlay says is what the keys do.
type KeyMap struct {
	Send        key.Binding
	Newline     key.Binding
	Stop        key.Binding
	Interrupt   key.Binding
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
		Interrupt:   key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "stop, clear the input; twice: quit")),
		Quit:        key.NewBinding(key.WithKeys("ctrl+d"), key.WithHelp("ctrl+d", "quit (on an empty input)")),
		Regenerate:  key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "regenerate the last reply")),
		EditLast:    key.NewBinding(key.WithKeys("ctrl+x"), key.WithHelp("ctrl+x", "edit the last prompt (esc: undo)")),
		Complete:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "complete a /command")),
		ToggleThink: key.NewBinding(key.WithKeys("ctrl+t"), key.WithHelp("ctrl+t", "show / fold thinking")),
		Copy:        key.NewBinding(key.WithKeys("ctrl+y"), key.WithHelp("ctrl+y", "copy the last reply")),
		Backend:     key.NewBinding(key.WithKeys("ctrl+b", "f2"), key.WithHelp("ctrl+b / f2", "backend panel")),
		Profile:     key.NewBinding(key.WithKeys("ctrl+p", "f3"), key.WithHelp("ctrl+p / f3", "profiling panel")),
		Sessions:    key.NewBinding(key.WithKeys("ctrl+s", "f4"), key.WithHelp("ctrl+s / f4", "sessions")),
		NewChat:     key.NewBinding(key.WithKeys("ctrl+n"), key.WithHelp("ctrl+n", "new chat")),
		Help:        key.NewBinding(key.WithKeys("f1", "ctrl+g"), key.WithHelp("f1 / ctrl+g / ?", "this help (? on an empty input)")),
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
		k.Send, k.Newline, k.HistoryPrev, k.HistoryNext, k.Complete, k.Stop, k.Interrupt, k.Quit,
		k.Regenerate, k.EditLast, k.ToggleThink, k.Copy, k.Backend, k.Profile,
		k.Sessions, k.NewChat, k.PageUp, k.PageDown, k.Bottom, k.Help,
	}
}

// Errors of Override, inside a *KeyError.
var (
	// ErrUnknownAction: a key override names no action.
	ErrUnknownAction = errors.New("unknown key action")
	// ErrUnknownKey: a key override spells a key the terminal never
	// reports, so the action would have no key at all.
	ErrUnknownKey = errors.New("unknown key")
)

// KeyError is an override Override refused, with the action it was for.
type KeyError struct {
	Action string
	Err    error
}

func (e *KeyError) Error() string { return "keys." + e.Action + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// keyNames are the key names bubbletea reports (and shift+enter, which the
// model recognises itself).
var keyNames = func() map[string]bool {
	names := map[string]bool{"shift+enter": true}
	for t := tea.KeyType(-1000); t < 1000; t++ {
		if s := t.String(); s != "" {
			names[s] = true
		}
	}
	return names
}()

// validKey reports whether a key press can ever match spelling s: a named
// key or one printable character, either with alt+.
func validKey(s string) bool {
	s = strings.TrimPrefix(s, "alt+")
	if keyNames[s] {
		return true
	}
	r, size := utf8.DecodeRuneInString(s)
	return size == len(s) && r != utf8.RuneError && unicode.IsPrint(r)
}

// actions maps the names used in the config file's [keys] table to bindings.
func (k *KeyMap) actions() map[string]*key.Binding {
	return map[string]*key.Binding{
		"send": &k.Send, "newline": &k.Newline, "stop": &k.Stop, "quit": &k.Quit,
		"regenerate": &k.Regenerate, "edit": &k.EditLast, "complete": &k.Complete,
		"think": &k.ToggleThink, "copy": &k.Copy, "backend": &k.Backend, "profile": &k.Profile,
		"sessions": &k.Sessions, "new": &k.NewChat, "help": &k.Help, "page_up": &k.PageUp,
		"page_down": &k.PageDown, "bottom": &k.Bottom, "history_prev": &k.HistoryPrev,
		"history_next": &k.HistoryNext,
	}
}

// Override rebinds actions from the config file: action name → keys,
// comma-separated as bubbletea spells them ("ctrl+j", "alt+enter").
func (k *KeyMap) Override(overrides map[string]string) error {
	acts := k.actions()
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b, ok := acts[name]
		if !ok {
			known := make([]string, 0, len(acts))
			for a := range acts {
				known = append(known, a)
			}
			sort.Strings(known)
			return &KeyError{Action: name, Err: fmt.Errorf("%w (known: %s)", ErrUnknownAction, strings.Join(known, ", "))}
		}
		var keys []string
		for _, s := range strings.Split(overrides[name], ",") {
			if s = strings.TrimSpace(s); s != "" {
				if !validKey(s) {
					return &KeyError{Action: name, Err: fmt.Errorf("%w %q (keys are spelled like \"ctrl+j\", \"alt+enter\", \"f5\" or one character)", ErrUnknownKey, s)}
				}
				keys = append(keys, s)
			}
		}
		if len(keys) == 0 {
			return &KeyError{Action: name, Err: errors.New("no key given")}
		}
		b.SetKeys(keys...)
		b.SetHelp(strings.Join(keys, " / "), b.Help().Desc)
	}
	return nil
}
