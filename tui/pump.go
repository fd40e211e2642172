package tui

import (
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	tea "github.com/charmbracelet/bubbletea"
)

// engineMsg carries every event the engine had ready when the UI asked, so
// that a burst of tokens becomes one update, not one per token.
type engineMsg struct {
	events []engine.Event
	closed bool // the events channel is closed: the engine is gone
}

// maxEventsPerMsg bounds one batch so the UI never starves on a flood.
const maxEventsPerMsg = 1024

// waitForEngine reads the next batch of events. The root model re-arms it
// after each engineMsg, so exactly one read is pending at a time and events
// keep their order.
func waitForEngine(ch <-chan engine.Event) tea.Cmd {
	return func() tea.Msg {
		ev, ok := <-ch
		if !ok {
			return engineMsg{closed: true}
		}
		batch := []engine.Event{ev}
		for len(batch) < maxEventsPerMsg {
			select {
			case ev, ok := <-ch:
				if !ok {
					return engineMsg{events: batch, closed: true}
				}
				batch = append(batch, ev)
			default:
				return engineMsg{events: batch}
			}
		}
		return engineMsg{events: batch}
	}
}

// frameInterval is how often streamed text reaches the screen (~30 fps):
// tokens are buffered between frames, so the markdown tail is rendered at
// most 30 times a second however fast the model runs.
const frameInterval = 33 * time.Millisecond

type frameMsg struct{}

func frameTick() tea.Cmd { return frameTickAfter(0) }

// frameTickAfter schedules the next frame given what the last one cost:
// when drawing gets slow (a very long paragraph or code block being
// re-rendered), frames space out so the UI never takes more than about a
// quarter of a core from the model.
func frameTickAfter(cost time.Duration) tea.Cmd {
	return tea.Tick(max(frameInterval, 3*cost), func(time.Time) tea.Msg { return frameMsg{} })
}

// noteExpiredMsg clears the status note with the same id.
type noteExpiredMsg struct{ id int }

const noteLifetime = 4 * time.Second

func expireNote(id int) tea.Cmd {
	return tea.Tick(noteLifetime, func(time.Time) tea.Msg { return noteExpiredMsg{id: id} })
}
