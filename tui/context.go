package tui

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/engine"
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
	m.conv.Notice(fmt.Sprintf("The chat no longer fits the %d-token context: the model does not see the oldest %d message(s) any more (the system prompt stays). %s.",
		ev.Context, ev.Dropped, contextAdvice))
}

// warnContextFilling warns once per chat when a reply leaves the context
// mostly used.
func (m *Model) warnContextFilling(st engine.Stats) {
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
}
