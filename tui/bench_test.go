package tui

import (
	"fmt"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
)

// longChat builds a chat with n finished turns of markdown.
func longChat(b *testing.B, turns int) *Model {
	b.Helper()
	m := New(Options{Engine: silentEngine{}, Clipboard: func(string) (string, error) { return "", nil }})
	b.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	reply := "Here is **some** text with `code`.\n\n```go\nfunc f() int { return 1 }\n```\n\n- one\n- two\n\nDone."
	for i := 0; i < turns; i++ {
		typeText(m, fmt.Sprintf("question %d", i))
		press(m, tea.KeyEnter)
		m.Update(engineMsg{events: []engine.Event{engine.Token{Text: reply}, engine.Done{Reason: "stop"}}})
	}
	return m
}

// BenchmarkFrameLongTranscript is one streaming frame (flush + View) in a
// chat of 200 turns: the finished turns must cost (almost) nothing.
func BenchmarkFrameLongTranscript(b *testing.B) {
	m := longChat(b, 200)
	typeText(m, "more")
	press(m, tea.KeyEnter)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Update(engineMsg{events: []engine.Event{engine.Token{Text: " word"}}})
		m.Update(frameMsg{})
		_ = m.View()
	}
}

// BenchmarkStreamParagraphs streams a 2000-paragraph reply, a frame per
// paragraph: with stable-prefix rendering each frame re-renders one
// paragraph, not the reply.
func BenchmarkStreamParagraphs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		m := longChat(b, 0)
		typeText(m, "long")
		press(m, tea.KeyEnter)
		b.StartTimer()
		for p := 0; p < 2000; p++ {
			m.Update(engineMsg{events: []engine.Event{engine.Token{Text: "A paragraph of about ten words, streamed into the reply.\n\n"}}})
			m.Update(frameMsg{})
		}
	}
}

// BenchmarkResize re-wraps a 200-turn chat at a new width.
func BenchmarkResize(b *testing.B) {
	m := longChat(b, 200)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Update(tea.WindowSizeMsg{Width: 80 + i%2*20, Height: 40})
		_ = m.View()
	}
}

// BenchmarkView is the cost of a View with nothing changed (bubbletea calls
// it after every message, including each engine batch).
func BenchmarkView(b *testing.B) {
	m := longChat(b, 50)
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlB})
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlP})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = m.View()
	}
}

// silentEngine accepts every request and reports nothing: benchmarks feed
// the events themselves.
type silentEngine struct{}

func (silentEngine) Events() <-chan engine.Event     { return nil }
func (silentEngine) Generate(engine.GenerateRequest) {}
func (silentEngine) Stop()                           {}
func (silentEngine) SwitchBackend(string)            {}
func (silentEngine) SwitchModel(string)              {}
func (silentEngine) Reset()                          {}
func (silentEngine) Close()                          {}
