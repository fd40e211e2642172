package tui

import (
	"errors"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

func TestParseSlash(t *testing.T) {
	tests := []struct {
		in        string
		name, arg string
		ok        bool
	}{
		{"/think on", "think", "on", true},
		{"  /SYSTEM  Be brief.  ", "system", "Be brief.", true},
		{"/new", "new", "", true},
		{"//not a command", "", "", false},
		{"hello /think", "", "", false},
	}
	for _, tc := range tests {
		name, arg, ok := parseSlash(tc.in)
		if name != tc.name || arg != tc.arg || ok != tc.ok {
			t.Errorf("parseSlash(%q) = %q, %q, %v", tc.in, name, arg, ok)
		}
	}
}

func TestComplete(t *testing.T) {
	tests := map[string]string{
		"/th":         "/think ",
		"/think o":    "/think o", // on and off share only "o"
		"/think of":   "/think off",
		"/s":          "/s",  // /sessions and /system
		"/se":         "/se", // /sessions and /set
		"/ses":        "/sessions",
		"/set te":     "/set temperature",
		"/new":        "/new",
		"/nope":       "/nope",
		"plain text":  "plain text",
		"/backend g":  "/backend gpu",
		"/model x y":  "/model x y",
		"/p":          "/p", // /profile, /panel
		"/panel b":    "/panel backend",
		"/export a.m": "/export a.m",
	}
	for in, want := range tests {
		if got := complete(in); got != want {
			t.Errorf("complete(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKeyOverride(t *testing.T) {
	k := DefaultKeyMap()
	if err := k.Override(map[string]string{"send": "ctrl+s, alt+s", "think": "f6"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.Send.Keys(), ","); got != "ctrl+s,alt+s" {
		t.Errorf("send keys %q", got)
	}
	if k.Send.Help().Key != "ctrl+s / alt+s" {
		t.Errorf("help shows %q", k.Send.Help().Key)
	}
	if err := k.Override(map[string]string{"sned": "x"}); !errors.Is(err, ErrUnknownAction) {
		t.Errorf("unknown action: %v", err)
	}
	if err := k.Override(map[string]string{"send": " , "}); err == nil {
		t.Error("an empty key list was accepted")
	}
	for _, bad := range []string{"bogus+key", "ctrl+enterr", "enter, ctrl+", "ab", "\x1b"} {
		var ke *KeyError
		if err := k.Override(map[string]string{"send": bad}); !errors.Is(err, ErrUnknownKey) || !errors.As(err, &ke) || ke.Action != "send" {
			t.Errorf("send = %q: %v, want ErrUnknownKey for send", bad, err)
		}
	}
	good := DefaultKeyMap()
	for _, ok := range []string{"enter", "alt+enter", "shift+enter", "ctrl+j", "f12", "x", "alt+x", "é", "ctrl+end", "pgdown"} {
		if err := good.Override(map[string]string{"stop": ok}); err != nil {
			t.Errorf("stop = %q refused: %v", ok, err)
		}
	}
	for _, b := range append(DefaultKeyMap().helpRows(), DefaultKeyMap().Interrupt) {
		for _, key := range b.Keys() {
			if !validKey(key) {
				t.Errorf("default key %q is not a valid spelling", key)
			}
		}
	}
	// The override takes effect in the chat.
	m, fe, _ := newTestModel(t, Options{Keys: &k}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "hi")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	idle(t, m, fe)
	if len(fe.Requests()) != 1 {
		t.Error("the rebound send key did not send")
	}
}

// Typing "/" lists the commands with their one-line help above the input;
// letters narrow the list, tab completes, and the list goes once the name
// is done.
func TestSlashPopup(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 100, 30)
	loaded(t, m, fe)
	typeText(m, "/")
	v := plain(m.View())
	for _, w := range []string{"tab completes", "/sessions", "saved chats: open, rename, delete", "/copy [N]", "copy the last reply or code block N"} {
		contains(t, v, w)
	}
	typeText(m, "s")
	v = plain(m.View())
	contains(t, v, "/system [text|none]")
	lacks(t, v, "start a new chat")
	typeText(m, "es")
	press(m, tea.KeyTab)
	if got := m.input.Value(); got != "/sessions" {
		t.Fatalf("tab completed to %q", got)
	}
	typeText(m, " ")
	lacks(t, m.View(), "tab completes")
	// At 12 rows the popup fits what room there is and says how many more.
	small, fe2, _ := newTestModel(t, Options{}, 80, 12)
	loaded(t, small, fe2)
	typeText(small, "/")
	v = plain(small.View())
	contains(t, v, "more: type on to narrow")
	if n := len(strings.Split(v, "\n")); n != 12 {
		t.Errorf("the popup changed the view's height to %d rows", n)
	}
}
