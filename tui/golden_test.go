package tui

import (
	"testing"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/tui/fakeengine"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
)

// goldenChat builds a chat from scripted events only (no timers, no fake
// engine goroutines), so its views are byte-for-byte reproducible.
func goldenChat(t *testing.T, width, height int) *Model {
	t.Helper()
	m, _, _ := newTestModel(t, Options{Think: true, System: "You are a concise assistant."}, width, height)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "How do I read a file in Go?")
	press(m, tea.KeyEnter)
	stats := engine.Stats{PrefillTokens: 31, DecodeTokens: 57, PrefillTPS: 412.5, DecodeTPS: 48.25,
		TTFT: 180 * time.Millisecond, ContextUsed: 88, ContextSize: 4096, KVUsedBytes: 9 << 20, KVAllocBytes: 448 << 20}
	var s profile.Sample
	for p := profile.Phase(0); p < profile.NumPhases; p++ {
		s.Add(p, time.Duration(p+1)*3*time.Millisecond)
	}
	s.Tokens, s.Source = 12, "cpu timers"
	m.Update(engineMsg{events: []engine.Event{
		engine.Token{Text: "The user wants file reading. Use os.ReadFile.", Thinking: true},
		engine.Token{Text: "Use **os.ReadFile**:\n\n```go\ndata, err := os.ReadFile(\"notes.txt\")\nif err != nil {\n\treturn err\n}\n```\n\nIt returns the whole file as a byte slice."},
		engine.ProfileSample{Sample: s},
		engine.Done{Reason: "stop", Stats: stats},
	}})
	return m
}

func TestGoldenChat(t *testing.T) {
	for _, tc := range []struct {
		name          string
		width, height int
		keys          []tea.KeyType
	}{
		{"narrow", 60, 24, nil},
		{"standard", 80, 24, nil},
		{"panels_stacked", 80, 40, []tea.KeyType{tea.KeyCtrlB, tea.KeyCtrlP}},
		{"panels_side", 130, 32, []tea.KeyType{tea.KeyCtrlB, tea.KeyCtrlP}},
		{"thinking_open", 80, 24, []tea.KeyType{tea.KeyCtrlT}},
		{"help", 80, 30, []tea.KeyType{tea.KeyF1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := goldenChat(t, tc.width, tc.height)
			for _, k := range tc.keys {
				m.Update(tea.KeyMsg{Type: k})
			}
			golden.RequireEqual(t, []byte(m.View()))
		})
	}
}

func TestGoldenStreaming(t *testing.T) {
	m, _, _ := newTestModel(t, Options{}, 70, 20)
	m.Update(engineMsg{events: []engine.Event{engine.Loaded{Info: fakeengine.DefaultInfo}}})
	typeText(m, "List three fruits")
	press(m, tea.KeyEnter)
	m.Update(engineMsg{events: []engine.Event{
		engine.Token{Text: "Here are three:\n\n1. Apple\n2. Ban"},
		engine.Stats{DecodeTokens: 9, DecodeTPS: 51.5, ContextUsed: 30, ContextSize: 4096, KVUsedBytes: 3 << 20, KVAllocBytes: 448 << 20},
	}})
	m.Update(frameMsg{})
	golden.RequireEqual(t, []byte(m.View()))
}
