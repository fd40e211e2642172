package tui

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	tea "github.com/charmbracelet/bubbletea"
)

// contextWarnPercent is how full the context is when the user is first told
// that the oldest turns will soon be left out.
const contextWarnPercent = 75

// contextAdvice says what to do about a small context.
const contextAdvice = "/new starts afresh; --ctx N (or context_size in config.toml) gives more room"

// contextTrimmed tells the user, once per change, that the model no longer
// sees the oldest messages.
func (m *Model) contextTrimmed(ev engine.ContextTrimmed) {
	if ev.Dropped == m.trimmed {
		return
	}
	m.trimmed = ev.Dropped
	m.warnedFull = true
	m.conv.Warning(fmt.Sprintf("The chat no longer fits the %d-token context: the model does not see the oldest %d message(s) any more (the system prompt stays). %s.",
		ev.Context, ev.Dropped, contextAdvice))
}

// warnContextFilling warns once per chat when a reply leaves the context
// mostly used.
func (m *Model) warnContextFilling(st engine.Stats) {
	m.status.warning = contextWarning(st, m.trimmed)
	if m.warnedFull || st.ContextSize <= 0 || st.ContextUsed*100 < contextWarnPercent*st.ContextSize {
		return
	}
	m.warnedFull = true
	m.conv.Notice(fmt.Sprintf("The context is %d%% full (%d of %d tokens). Past it, the oldest turns are left out; %s.",
		st.ContextUsed*100/st.ContextSize, st.ContextUsed, st.ContextSize, contextAdvice))
}

// resetContextNotes starts a chat's context story afresh.
func (m *Model) resetContextNotes() {
	m.trimmed, m.warnedFull = 0, false
	m.status.warning = ""
}

// contextWarning is the status line's standing warning about the context
// after a reply: it stays while it holds (unlike a transient note) and
// goes with the condition, or with a new chat.
func contextWarning(st engine.Stats, dropped int) string {
	switch {
	case dropped > 0:
		return fmt.Sprintf("oldest %d message(s) out of the model's view · /new", dropped)
	case st.ContextSize > 0 && st.ContextUsed*100 >= contextWarnPercent*st.ContextSize:
		return fmt.Sprintf("context %d%% full · /new or --ctx", st.ContextUsed*100/st.ContextSize)
	}
	return ""
}

// contextMeasuredMsg brings the size in tokens of the conversation shown,
// for the status line's gauge before its first reply (a resumed chat).
type contextMeasuredMsg struct {
	sessionID int64
	tokens    int
}

// measureContext counts the conversation's tokens in the background when
// the gauge knows nothing yet: a resumed chat shows its size at once, not
// 0 until the next reply.
func (m *Model) measureContext() tea.Cmd {
	counter, ok := m.eng.(tokenCounter)
	msgs := m.conv.Messages()
	if !ok || m.info == nil || m.status.stats.ContextUsed > 0 || !hasTurns(msgs) {
		return nil
	}
	id, think := m.sessionID, m.think
	return func() tea.Msg {
		n, err := counter.CountTokens(msgs, think)
		if err != nil {
			return nil
		}
		return contextMeasuredMsg{sessionID: id, tokens: n}
	}
}

func (m *Model) contextMeasured(msg contextMeasuredMsg) {
	if msg.sessionID != m.sessionID || m.status.stats.ContextUsed > 0 || m.generating {
		return // another chat, or a reply's own numbers came first
	}
	m.status.stats.ContextUsed = msg.tokens
}

// hasTurns says whether msgs hold more than a system prompt.
func hasTurns(msgs []chat.Message) bool {
	for _, m := range msgs {
		if m.Role != chat.RoleSystem {
			return true
		}
	}
	return false
}
