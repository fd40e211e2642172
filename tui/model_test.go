package tui

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

func TestStreamingShowsPartialReplyThenFooter(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 24)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "hi")
	press(m, tea.KeyEnter)
	if !m.generating {
		t.Fatal("enter did not start a reply")
	}
	m.Update(engineMsg{events: []engine.Event{
		engine.Token{Text: "Hello"}, engine.Token{Text: " wor"},
		engine.Stats{DecodeTokens: 2, DecodeTPS: 12.5, ContextUsed: 20, ContextSize: 4096},
	}})
	// Tokens are held until the next frame.
	lacks(t, m.View(), "Hello wor")
	contains(t, m.View(), "12.5 tok/s")
	contains(t, m.View(), "generating")
	m.Update(frameMsg{})
	contains(t, m.View(), "Hello wor")
	m.Update(engineMsg{events: []engine.Event{
		engine.Token{Text: "ld"},
		engine.Done{Reason: "stop", Stats: engine.Stats{DecodeTokens: 3, DecodeTPS: 30, PrefillTPS: 400, TTFT: 120 * time.Millisecond, ContextUsed: 21, ContextSize: 4096}},
	}})
	v := m.View()
	contains(t, v, "Hello world")
	contains(t, v, "3 tokens · 30.0 tok/s · first token 120ms")
	contains(t, v, "ready")
	contains(t, v, "ctx 21/4096")
	if m.generating {
		t.Error("still generating after Done")
	}
}

func TestThinkingFoldsAndUnfolds(t *testing.T) {
	m, _, _ := newTestModel(t, Options{Think: true}, 80, 30)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "q")
	press(m, tea.KeyEnter)
	thought := "line one of thought\nline two\nline three\nline four\nline five\nline six"
	m.Update(engineMsg{events: []engine.Event{engine.Token{Text: thought, Thinking: true}}})
	m.Update(frameMsg{})
	v := m.View()
	contains(t, v, "thinking…")
	contains(t, v, "line six")
	lacks(t, v, "line one") // only the tail shows while streaming
	m.Update(engineMsg{events: []engine.Event{engine.Token{Text: "Answer."}, engine.Done{Reason: "stop"}}})
	v = m.View()
	contains(t, v, "thought for")
	lacks(t, v, "line six")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlT})
	contains(t, m.View(), "line one of thought")
	req := m.conv.Messages()
	if got := req[len(req)-1]; got.Thinking != thought || got.Content != "Answer." {
		t.Errorf("reply kept as %+v", got)
	}
}

func TestStopKeepsPartialReply(t *testing.T) {
	fe := fakeengine.New(fakeengine.Options{TokenDelay: 5 * time.Millisecond,
		Replies: []fakeengine.Reply{{Content: strings.Repeat("word ", 400)}}})
	m, _, _ := newTestModel(t, Options{Engine: fe}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "tell me a long story")
	press(m, tea.KeyEnter)
	pump(t, m, fe, func() bool { return strings.Contains(m.conv.entries[len(m.conv.entries)-1].content, "word word") })
	press(m, tea.KeyEsc)
	if fe.Stops() != 1 {
		t.Fatalf("esc called Stop %d times", fe.Stops())
	}
	contains(t, m.View(), "stopping")
	idle(t, m, fe)
	last := m.conv.entries[len(m.conv.entries)-1]
	if !last.stopped || last.content == "" || len(last.content) >= 2000 {
		t.Errorf("stopped reply: stopped=%v, %d bytes", last.stopped, len(last.content))
	}
	contains(t, m.View(), "■ stopped")
}

func TestRegenerateReplacesLastReply(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "first")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	idle(t, m, fe)
	reqs := fe.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if len(reqs[1].Messages) != 1 || reqs[1].Messages[0].Content != "first" {
		t.Errorf("regenerate sent %+v, want just the prompt", reqs[1].Messages)
	}
	v := m.View()
	contains(t, v, "Reply 2 to: first")
	lacks(t, v, "Reply 1 to")
}

func TestEditLastPrompt(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 80, 24)
	loaded(t, m, fe)
	for _, p := range []string{"one", "two"} {
		typeText(m, p)
		press(m, tea.KeyEnter)
		idle(t, m, fe)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	if got := m.input.Value(); got != "two" {
		t.Fatalf("input holds %q after edit, want the last prompt", got)
	}
	lacks(t, m.View(), "Reply 2 to")
	typeText(m, "!")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	reqs := fe.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 3 || last[2].Content != "two!" {
		t.Errorf("edited request %+v", last)
	}
}

func TestSendBlockedWhileLoadingOrStreaming(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{Engine: fakeengine.New(fakeengine.Options{TokenDelay: time.Hour})}, 80, 24)
	typeText(m, "early")
	press(m, tea.KeyEnter)
	if len(fe.Requests()) != 0 {
		t.Fatal("sent before the model loaded")
	}
	contains(t, m.View(), "still loading")
	if m.input.Value() != "early" {
		t.Error("the unsent prompt was lost")
	}
}

func TestHistoryBrowsing(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{State: &config.State{History: []string{"old one"}}}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "new")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	typeText(m, "draft")
	press(m, tea.KeyUp)
	if got := m.input.Value(); got != "new" {
		t.Fatalf("up: %q", got)
	}
	press(m, tea.KeyUp)
	if got := m.input.Value(); got != "old one" {
		t.Fatalf("up twice: %q", got)
	}
	press(m, tea.KeyDown)
	press(m, tea.KeyDown)
	if got := m.input.Value(); got != "draft" {
		t.Fatalf("back down: %q, want the draft", got)
	}
}

func TestMultilineInput(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "line 1")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlJ})
	typeText(m, "line 2")
	m.Update(tea.KeyMsg{Type: tea.KeyEnter, Alt: true})
	typeText(m, "line 3")
	if got := m.input.Value(); got != "line 1\nline 2\nline 3" {
		t.Fatalf("input %q", got)
	}
	if m.input.Height() != 3 {
		t.Errorf("input is %d rows, want 3", m.input.Height())
	}
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	if got := fe.Requests()[0].Messages[0].Content; got != "line 1\nline 2\nline 3" {
		t.Errorf("sent %q", got)
	}
}

func TestSlashCommands(t *testing.T) {
	tests := []struct {
		name  string
		cmd   string
		check func(t *testing.T, m *Model, fe *fakeengine.Engine, clip []string)
	}{
		{"new resets", "/new", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			if fe.Resets() != 1 || len(m.conv.entries) != 1 || m.conv.entries[0].kind != entrySystem {
				t.Errorf("resets=%d entries=%d", fe.Resets(), len(m.conv.entries))
			}
		}},
		{"clear keeps system prompt", "/clear", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			if len(m.conv.entries) != 1 || m.conv.entries[0].kind != entrySystem {
				t.Errorf("entries %+v", m.conv.entries)
			}
		}},
		{"system starts a new chat", "/system Be terse.", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			msgs := m.conv.Messages()
			if len(msgs) != 1 || msgs[0].Content != "Be terse." || msgs[0].Role != "system" {
				t.Errorf("messages %+v", msgs)
			}
		}},
		{"system alone shows the prompt", "/system", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "System prompt: You are helpful.")
			if msgs := m.conv.Messages(); len(msgs) < 2 || fe.Resets() != 0 {
				t.Errorf("/system without text changed the chat: %d messages, %d resets", len(msgs), fe.Resets())
			}
		}},
		{"system none removes it", "/system none", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			if msgs := m.conv.Messages(); len(msgs) != 0 {
				t.Errorf("messages %+v", msgs)
			}
		}},
		{"think off", "/think off", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			typeText(m, "x")
			press(m, tea.KeyEnter)
			idle(t, m, fe)
			reqs := fe.Requests()
			if reqs[len(reqs)-1].Think {
				t.Error("request still thinks")
			}
			contains(t, m.View(), "think off")
		}},
		{"backend switch", "/backend gpu", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "switching to gpu")
			pump(t, m, fe, func() bool { return m.info.Backend == "gpu" })
			if got := fe.Switches(); len(got) != 1 || got[0] != "gpu" {
				t.Errorf("switches %v", got)
			}
			v := m.View()
			lacks(t, v, "switching")
			contains(t, v, "ready")
		}},
		{"backend bad name", "/backend tpu", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			if len(fe.Switches()) != 0 {
				t.Error("switched to an unknown backend")
			}
			contains(t, m.View(), "/backend cpu")
		}},
		{"model", "/model", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "Fake-Bonsai")
		}},
		{"copy", "/copy", func(t *testing.T, m *Model, fe *fakeengine.Engine, clip []string) {}},
		{"help", "/help", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "Keys")
			press(m, tea.KeyPgDown)
			press(m, tea.KeyPgDown)
			contains(t, m.View(), "/export")
			press(m, tea.KeyEsc)
			lacks(t, m.View(), "Commands")
		}},
		{"profile", "/profile", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "Profile")
		}},
		{"panel backend", "/panel backend", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "Fake CPU")
		}},
		{"sessions without a store", "/sessions", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "not being saved")
		}},
		{"regen", "/regen", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			idle(t, m, fe)
			if n := len(fe.Requests()); n != 2 {
				t.Errorf("%d requests", n)
			}
		}},
		{"edit", "/edit", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			if m.input.Value() != "hello" {
				t.Errorf("input %q", m.input.Value())
			}
		}},
		{"quit", "/quit", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			if !m.quit {
				t.Error("did not quit")
			}
		}},
		{"unknown", "/frobnicate", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			contains(t, m.View(), "unknown command /frobnicate")
		}},
		{"double slash sends", "//etc/hosts", func(t *testing.T, m *Model, fe *fakeengine.Engine, _ []string) {
			idle(t, m, fe)
			reqs := fe.Requests()
			msgs := reqs[len(reqs)-1].Messages
			if msgs[len(msgs)-1].Content != "/etc/hosts" {
				t.Errorf("sent %q", msgs[len(msgs)-1].Content)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, fe, clip := newTestModel(t, Options{Think: true, System: "You are helpful."}, 100, 30)
			loaded(t, m, fe)
			typeText(m, "hello")
			press(m, tea.KeyEnter)
			idle(t, m, fe)
			typeText(m, tc.cmd)
			press(m, tea.KeyEnter)
			tc.check(t, m, fe, *clip)
		})
	}
}

func TestCopy(t *testing.T) {
	fe := fakeengine.New(fakeengine.Options{Replies: []fakeengine.Reply{{Content: "Try:\n\n```sh\nls -l\n```\n\nor\n\n```\npwd\n```"}}})
	m, _, clip := newTestModel(t, Options{Engine: fe}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "how?")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	// Each block shows the number /copy takes, above its first line.
	view := plain(m.View())
	for _, w := range []string{"code 1 · /copy 1", "code 2 · /copy 2"} {
		contains(t, view, w)
	}
	if a, b, c := strings.Index(view, "code 1 · /copy 1"), strings.Index(view, "ls -l"), strings.Index(view, "code 2 · /copy 2"); !(a < b && b < c && c < strings.Index(view, "pwd")) {
		t.Errorf("labels not above their blocks:\n%s", view)
	}
	run := func(cmd tea.Cmd) {
		if cmd != nil {
			m.Update(runCmd(cmd))
		}
	}
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlY})
	run(cmd)
	typeText(m, "/copy 2")
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(cmd)
	if len(*clip) != 2 || !strings.HasPrefix((*clip)[0], "Try:") || (*clip)[1] != "pwd" {
		t.Fatalf("clipboard got %q", *clip)
	}
	contains(t, m.View(), "copied code block 2")
	typeText(m, "/copy 3")
	press(m, tea.KeyEnter)
	contains(t, strings.Join(strings.Fields(plain(m.View())), " "), "copies code block N (1 to 2, numbered above each block)")
}

// runCmd runs a command and, for a batch, the first message any part returns
// that the test cares about (not ticks, which would sleep).
func runCmd(cmd tea.Cmd) tea.Msg {
	msg := cmd()
	if b, ok := msg.(tea.BatchMsg); ok {
		for _, c := range b {
			if c == nil {
				continue
			}
			if m := c(); m != nil {
				if _, tick := m.(noteExpiredMsg); !tick {
					return m
				}
			}
		}
		return nil
	}
	return msg
}

func TestExport(t *testing.T) {
	dir := t.TempDir()
	m, fe, _ := newTestModel(t, Options{ExportDir: dir}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "export me")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	typeText(m, "/export chat.md")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	msg := runCmd(cmd)
	m.Update(msg)
	data, err := os.ReadFile(filepath.Join(dir, "chat.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"export me", "Reply 1 to: export me"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("export lacks %q:\n%s", want, data)
		}
	}
	contains(t, m.View(), "exported to")
}

func TestPanelTogglesAreRemembered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	m, fe, _ := newTestModel(t, Options{StatePath: path, State: &config.State{Panels: map[string]bool{}}}, 80, 40)
	loaded(t, m, fe)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlB})
	contains(t, m.View(), "Fake CPU")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
	contains(t, m.View(), "Profile")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlB})
	lacks(t, m.View(), "Fake CPU")
	m.Close()
	st, err := config.LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Panels[panelBackend] || !st.Panels[panelProfile] {
		t.Errorf("state file panels %v, want profile only", st.Panels)
	}
	m2, fe2, _ := newTestModel(t, Options{State: st}, 80, 40)
	loaded(t, m2, fe2)
	contains(t, m2.View(), "Profile")
}

func TestProfilePanelShowsPhases(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 40)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	var s profile.Sample
	s.Add(profile.FFN, 30*time.Millisecond)
	s.Add(profile.Attention, 10*time.Millisecond)
	s.Tokens = 10
	s.Source = "cpu timers"
	m.Update(engineMsg{events: []engine.Event{engine.ProfileSample{Sample: s}}})
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
	v := m.View()
	contains(t, v, "ffn")
	contains(t, v, "3.00ms")
	contains(t, v, "75%")
	contains(t, v, "total")
	contains(t, v, "4.00ms")
	contains(t, v, "mean of 10 timed steps · cpu timers")
	lacks(t, v, "tok/s") // the status line's measured speed is the one rate
}

// On the GPU only some decoding steps are timed: a sample without any must
// not blank the panel, which shows the prompt's passes until a step is
// timed, then the steps summed over the samples, and says what it sampled.
func TestProfilePanelFillsFromTheFirstReply(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 100, 40)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
	const gpu = "gpu timestamps (1 decoding step in 32)"
	prompt := profile.Sample{Tokens: 400, Source: gpu}
	prompt.Add(profile.FFN, 40*time.Millisecond)
	none := profile.Sample{Source: gpu}
	m.Update(engineMsg{events: []engine.Event{engine.ProfileSample{Sample: prompt, Prompt: true},
		engine.ProfileSample{Sample: none}, engine.ProfileSample{Sample: none}}})
	v := m.View()
	lacks(t, v, "no profile samples yet")
	contains(t, v, "reading the prompt, per token")
	contains(t, v, "last prompt: 400 tokens, 100µs per token")
	step := profile.Sample{Tokens: 1, Source: gpu}
	step.Add(profile.FFN, 2*time.Millisecond)
	m.Update(engineMsg{events: []engine.Event{engine.ProfileSample{Sample: step}, engine.ProfileSample{Sample: none},
		engine.ProfileSample{Sample: step}}})
	v = m.View()
	contains(t, v, "decoding, per token")
	contains(t, v, "2.00ms")
	contains(t, v, "mean of 2 timed steps")
}

func TestCtrlCStopsThenQuitsOnSecondPress(t *testing.T) {
	fe := fakeengine.New(fakeengine.Options{TokenDelay: 5 * time.Millisecond,
		Replies: []fakeengine.Reply{{Content: strings.Repeat("x ", 500)}}})
	m, _, _ := newTestModel(t, Options{Engine: fe}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "go")
	press(m, tea.KeyEnter)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if fe.Stops() != 1 || m.quit {
		t.Fatalf("first ctrl+c while generating: stops=%d quit=%v", fe.Stops(), m.quit)
	}
	idle(t, m, fe)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if m.quit {
		t.Fatal("one idle ctrl+c quit")
	}
	contains(t, m.View(), "press ctrl+c again")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if !m.quit || cmd == nil {
		t.Fatal("second ctrl+c did not quit")
	}
}

func TestEngineErrors(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 24)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "x")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{engine.Error{Err: errors.New("context full")}}})
	v := m.View()
	contains(t, v, "✗ context full")
	if m.generating {
		t.Error("still generating after an error")
	}
	m.Update(engineMsg{events: []engine.Event{engine.Error{Err: errors.New("device lost"), Fatal: true}}})
	contains(t, m.View(), "engine stopped")
	typeText(m, "again")
	press(m, tea.KeyEnter)
	contains(t, m.View(), "not sent: the engine has stopped")
}

func TestEngineChannelClosed(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 24)
	m.Update(engineMsg{closed: true})
	contains(t, m.View(), "engine has stopped")
}

func TestBackendSwitchFailureStaysOnOldBackend(t *testing.T) {
	fe := fakeengine.New(fakeengine.Options{FailBackend: "gpu"})
	m, _, _ := newTestModel(t, Options{Engine: fe}, 80, 40)
	loaded(t, m, fe)
	typeText(m, "/backend gpu")
	press(m, tea.KeyEnter)
	pump(t, m, fe, func() bool { return m.backend.switching == "" })
	v := m.View()
	contains(t, v, "no GPU adapter found")
	contains(t, v, "still on cpu")
	contains(t, v, "ready")
}

func TestFollowModeOnlyAtBottom(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 20)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "long")
	press(m, tea.KeyEnter)
	for i := 0; i < 40; i++ {
		m.Update(engineMsg{events: []engine.Event{engine.Token{Text: "line\n\n"}}})
		m.Update(frameMsg{})
	}
	if !m.conv.Following() {
		t.Fatal("not following while at the bottom")
	}
	m.Update(tea.KeyMsg{Type: tea.KeyPgUp})
	offset := m.conv.offset
	for i := 0; i < 10; i++ {
		m.Update(engineMsg{events: []engine.Event{engine.Token{Text: "more\n\n"}}})
		m.Update(frameMsg{})
	}
	if m.conv.offset != offset {
		t.Errorf("view jumped from %d to %d while scrolled up", offset, m.conv.offset)
	}
	contains(t, m.View(), "more below")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlEnd})
	if !m.conv.Following() {
		t.Error("ctrl+end did not return to the bottom")
	}
}

func TestCompletion(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 24)
	typeText(m, "/ba")
	contains(t, m.View(), "/backend [cpu|gpu|auto] — where it runs and why; reload")
	press(m, tea.KeyTab)
	if got := m.input.Value(); got != "/backend " {
		t.Fatalf("tab gave %q", got)
	}
	typeText(m, "g")
	press(m, tea.KeyTab)
	if got := m.input.Value(); got != "/backend gpu" {
		t.Fatalf("tab gave %q", got)
	}
}

// TestViewsFitEveryWidth draws every panel state at several sizes and checks
// that no line is wider than the terminal and the frame has its height.
func TestViewsFitEveryWidth(t *testing.T) {
	for _, size := range [][2]int{{60, 20}, {80, 24}, {120, 40}, {200, 50}} {
		m, fe, _ := newTestModel(t, Options{Think: true, System: "Be brief."}, size[0], size[1])
		check := func(state string) {
			t.Helper()
			v := m.View()
			lines := strings.Split(v, "\n")
			if len(lines) != size[1] {
				t.Errorf("%dx%d %s: %d lines", size[0], size[1], state, len(lines))
			}
			for i, l := range lines {
				if w := lipgloss.Width(l); w > size[0] {
					t.Errorf("%dx%d %s: line %d is %d wide: %q", size[0], size[1], state, i, w, plain(l))
				}
			}
		}
		check("loading")
		loaded(t, m, fe)
		typeText(m, "Explain **this** with a very long message that will wrap around the narrow terminal width for sure")
		press(m, tea.KeyEnter)
		idle(t, m, fe)
		check("chat")
		m.Update(tea.KeyMsg{Type: tea.KeyCtrlB})
		m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
		check("panels")
		m.Update(tea.KeyMsg{Type: tea.KeyF1})
		check("help")
		press(m, tea.KeyEsc)
		m.Update(tea.WindowSizeMsg{Width: size[0] + 7, Height: size[1] + 3})
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		check("resized")
	}
}

// TestControlCharactersNeverReachTheTerminal streams bytes a terminal would
// act on; the view shows them as symbols and the frame keeps its size.
func TestControlCharactersNeverReachTheTerminal(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 80, 24)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "x")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{engine.Token{Text: "a\x0bb\x0cc\r\nd\x1b[2Je\x07"}}})
	m.Update(frameMsg{})
	check := func() {
		t.Helper()
		raw := m.View()
		if strings.ContainsAny(raw, "\x0b\x0c\r\x07") || strings.Contains(raw, "\x1b[2J") {
			t.Errorf("raw control characters in the view: %q", raw)
		}
		v := plain(raw)
		if n := strings.Count(m.View(), "\n") + 1; n != 24 {
			t.Errorf("frame has %d lines", n)
		}
		contains(t, v, "a␋b␌c")
	}
	check()
	m.Update(engineMsg{events: []engine.Event{engine.Done{Reason: "stop"}}})
	check()
	if got := m.conv.Messages()[1].Content; got != "a\x0bb\x0cc\r\nd\x1b[2Je\x07" {
		t.Errorf("the transcript lost the model's raw text: %q", got)
	}
}

// TestSlashModelLoadsAnother: /model FILE resolves the file outside Update
// and asks the engine to load it; the status line follows the new model. A
// name that resolves to nothing is an error in the status line, and the
// engine is not asked.
func TestSlashModelLoadsAnother(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 100, 30)
	loaded(t, m, fe)
	typeText(m, "/model no-such-model-anywhere")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	// The error is long; the status line cuts it rather than hiding it.
	contains(t, m.View(), `model "no-such-model-anywhere": unknown model`)
	if !strings.Contains(m.status.note, "no-such-model-anywhere") || !m.status.noteErr {
		t.Fatalf("unknown model is not reported as an error: %q", m.status.note)
	}

	file := filepath.Join(t.TempDir(), "other-model.gguf")
	if err := os.WriteFile(file, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	typeText(m, "/model "+file)
	_, cmd = m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	run(m, cmd)
	pump(t, m, fe, func() bool { return m.info != nil && m.info.Path == file })
	v := m.View()
	// Confirmed, named in the header (not "Qwen3 (other)"), with the new
	// model's KV numbers, and what it writes is stored under its name.
	contains(t, v, "Now running other-model.gguf")
	if top := plain(strings.Split(v, "\n")[0]); !strings.Contains(top, "other-model.gguf") {
		t.Errorf("the header does not name the new model: %q", top)
	}
	contains(t, v, "KV 0/12 MiB")
	contains(t, v, "ctx 0/1024")
	if got := m.meta().Model; got != file {
		t.Errorf("replies are stored as model %q, want %q", got, file)
	}
	typeText(m, "/model")
	press(m, tea.KeyEnter)
	contains(t, m.View(), "other-model.gguf")
}

// A bare /export writes into the exports directory (made on first use) and
// says the full path; ~ is the home directory.
func TestExportPaths(t *testing.T) {
	home, dir := t.TempDir(), filepath.Join(t.TempDir(), "exports")
	m, fe, _ := newTestModel(t, Options{ExportDir: dir, HomeDir: home}, 200, 24)
	loaded(t, m, fe)
	typeText(m, "export me")
	press(m, tea.KeyEnter)
	idle(t, m, fe)
	for _, tc := range []struct{ arg, want string }{
		{"~/out.md", filepath.Join(home, "out.md")},
		{"", filepath.Join(dir, "bonsai-20261130-150000-export-me.md")},
	} {
		typeText(m, strings.TrimSpace("/export "+tc.arg))
		_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
		m.Update(runCmd(cmd))
		if _, err := os.Stat(tc.want); err != nil {
			t.Errorf("/export %s: %v", tc.arg, err)
		}
		contains(t, m.View(), "exported to "+tc.want)
	}
	typeText(m, "/export /nonexistent-dir/x.md")
	_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyEnter})
	m.Update(runCmd(cmd))
	contains(t, m.View(), "export failed: /nonexistent-dir/x.md: no such file or directory")
}

// A first load that failed leaves a chat that says how to get a model and
// gets one: /backend cpu loads it, and messages are sent again.
func TestFailedLoadRecoversBySwitching(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 80, 24)
	m.Update(engineMsg{events: []engine.Event{engine.Error{Err: errors.New("backend gpu: no GPU adapter"), NoModel: true}}})
	v := m.View()
	contains(t, v, "no model")
	contains(t, v, "no model is loaded: /backend cpu")
	typeText(m, "hello")
	press(m, tea.KeyEnter)
	contains(t, m.View(), "not sent: no model is loaded")
	// A switch that fails too leaves the chat as it was, still saying so.
	m.Update(engineMsg{events: []engine.Event{engine.Error{Err: errors.New("switching to gpu: no GPU adapter"), NoModel: true}}})
	contains(t, m.View(), "✗ no model")
	m.input.SetValue("/backend cpu")
	press(m, tea.KeyEnter)
	loaded(t, m, fe)
	pump(t, m, fe, func() bool { return m.status.phase == phaseReady })
	typeText(m, "hello")
	press(m, tea.KeyEnter)
	if !m.generating {
		t.Fatalf("not sent after /backend cpu loaded a model:\n%s", plain(m.View()))
	}
	idle(t, m, fe)
	contains(t, m.View(), "Reply 1 to: hello")
}

// Ctrl+C on typed text clears it (as in ollama and aichat) and never quits;
// the text is one ↑ away. On an edit it puts the edited turn back.
func TestCtrlCClearsTheInput(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 80, 24)
	loaded(t, m, fe)
	typeText(m, "a long draft")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if m.quit {
		t.Fatal("ctrl+c on typed text counted towards quitting")
	}
	if m.input.Value() != "" {
		t.Fatalf("input after ctrl+c: %q, want it cleared", m.input.Value())
	}
	contains(t, m.View(), "press ctrl+c again")
	press(m, tea.KeyUp)
	if m.input.Value() != "a long draft" {
		t.Errorf("↑ after clearing gave %q", m.input.Value())
	}
	m.input.SetValue("")
	sendAndWait(t, m, fe, "question")
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlC})
	if m.input.Value() != "" || len(m.conv.Messages()) != 2 || m.quit {
		t.Errorf("ctrl+c on an edit: input %q, %d messages, quit %v; want the turn back", m.input.Value(), len(m.conv.Messages()), m.quit)
	}
}

// The backend panel gives auto's fallback one line and /backend the whole
// reason; with both panels open the profile panel stays on the screen.
func TestBackendPanelsFitTogether(t *testing.T) {
	info := fakeengine.DefaultInfo
	info.Details = []string{"auto: GPU declined (see /backend)",
		"memory: 248 MiB mapped, 12 MiB activations", "repacked: 231 MiB", "threads: 2 of 2 cores",
		"a long backend note that wraps over more than one line of the panel at this width, and then some more"}
	info.Fallback = "backend gpu: gpu: only software adapters (llvmpipe); they are used only when allowed or named: no GPU adapter. BONSAI_GPU_SOFTWARE=1 (or --adapter NAME) lets the GPU backend use one"
	for _, size := range [][2]int{{80, 24}, {120, 30}} {
		m, _, _ := newTestModel(t, Options{}, size[0], size[1])
		m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: info}}})
		var s profile.Sample
		s.Add(profile.FFN, 30*time.Millisecond)
		s.Tokens, s.Source = 10, "cpu timers"
		m.Update(engineMsg{events: []engine.Event{engine.ProfileSample{Sample: s}}})
		m.Update(tea.KeyMsg{Type: tea.KeyCtrlB})
		m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
		v := m.View()
		contains(t, v, "GPU declined (see /backend)")
		contains(t, v, "Profile")
		contains(t, v, "total")
		lacks(t, v, "only software adapters")
	}
	m, _, _ := newTestModel(t, Options{}, 100, 40)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: info}}})
	slash(m, "/backend")
	v := strings.Join(strings.Fields(plain(m.View())), " ")
	if !strings.Contains(v, "only software adapters") || !strings.Contains(v, "BONSAI_GPU_SOFTWARE=1") {
		t.Errorf("/backend does not give the reason:\n%s", plain(m.View()))
	}
}

// /panel and /copy say what they take in words, not "no panel  (...)" or
// "0 code block(s)".
func TestPanelAndCopyMessages(t *testing.T) {
	m, fe, _ := newTestModel(t, Options{}, 100, 30)
	loaded(t, m, fe)
	slash(m, "/panel")
	if bar := statusBar(m); !strings.Contains(bar, "/panel backend or /panel profile") || strings.Contains(bar, "no panel ") {
		t.Errorf("/panel: %q", bar)
	}
	sendAndWait(t, m, fe, "hi")
	slash(m, "/copy abc")
	v := strings.Join(strings.Fields(plain(m.View())), " ")
	if !strings.Contains(v, "no code blocks: /copy alone copies the whole reply") || strings.Contains(v, "0 code block") {
		t.Errorf("/copy abc on a reply without code:\n%s", plain(m.View()))
	}
}
