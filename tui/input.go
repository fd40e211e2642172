package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/textarea"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// maxInputRows is how tall the input grows before it scrolls.
const maxInputRows = 8

// input is the prompt editor: a multi-line textarea with prompt history.
type input struct {
	ta      textarea.Model
	history []string // oldest first
	histPos int      // index into history; len(history) while editing a new prompt
	draft   string   // the new prompt put aside while browsing history
}

func newInput(st *Styles) input {
	ta := textarea.New()
	ta.Placeholder = "Message bonsai… (/ for commands)"
	ta.ShowLineNumbers = false
	ta.CharLimit = 0
	ta.MaxHeight = 1000
	ta.Prompt = "┃ "
	// Enter sends; the root model inserts newlines for ctrl+j and friends.
	ta.KeyMap.InsertNewline.SetEnabled(false)
	focused, blurred := textarea.DefaultStyles()
	focused.CursorLine = lipgloss.NewStyle()
	focused.Prompt = st.Prompt
	focused.Placeholder = st.Dim
	blurred.Prompt = st.Dim
	blurred.Placeholder = st.Dim
	ta.FocusedStyle, ta.BlurredStyle = focused, blurred
	ta.SetHeight(1)
	ta.Focus()
	return input{ta: ta}
}

// SetWidth sizes the editor and fits its height to the text.
func (in *input) SetWidth(w int) {
	in.ta.SetWidth(max(w, 10))
	in.fitHeight()
}

// fitHeight grows the editor with its content, up to maxInputRows.
func (in *input) fitHeight() {
	rows := 0
	width := max(in.ta.Width(), 1)
	for _, line := range strings.Split(in.ta.Value(), "\n") {
		rows += max(1, (lipgloss.Width(line)+width)/width)
	}
	in.ta.SetHeight(min(max(rows, 1), maxInputRows))
}

func (in *input) Value() string { return in.ta.Value() }

// SetValue replaces the text and puts the cursor at its end.
func (in *input) SetValue(s string) {
	in.ta.SetValue(s)
	in.fitHeight()
}

// Newline inserts a line break at the cursor.
func (in *input) Newline() {
	in.ta.InsertRune('\n')
	in.fitHeight()
}

// Update passes a key (or paste) to the editor.
func (in *input) Update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	in.ta, cmd = in.ta.Update(msg)
	in.fitHeight()
	return cmd
}

// OnFirstLine and OnLastLine say whether up/down should browse history
// rather than move the cursor.
func (in *input) OnFirstLine() bool {
	return in.ta.Line() == 0 && in.ta.LineInfo().RowOffset == 0
}

func (in *input) OnLastLine() bool {
	li := in.ta.LineInfo()
	return in.ta.Line() == in.ta.LineCount()-1 && li.RowOffset >= li.Height-1
}

// Remember adds a sent prompt to the history (skipping repeats) and starts a
// new prompt.
func (in *input) Remember(prompt string) {
	if prompt != "" && (len(in.history) == 0 || in.history[len(in.history)-1] != prompt) {
		in.history = append(in.history, prompt)
	}
	in.histPos = len(in.history)
	in.draft = ""
}

// History sets the prompt history (oldest first), e.g. from a saved session.
func (in *input) History(prompts []string) {
	in.history = append([]string(nil), prompts...)
	in.histPos = len(in.history)
}

// Prev and Next browse the history; the prompt being written is kept.
func (in *input) Prev() {
	if in.histPos == 0 {
		return
	}
	if in.histPos == len(in.history) {
		in.draft = in.ta.Value()
	}
	in.histPos--
	in.SetValue(in.history[in.histPos])
}

func (in *input) Next() {
	if in.histPos >= len(in.history) {
		return
	}
	in.histPos++
	if in.histPos == len(in.history) {
		in.SetValue(in.draft)
		return
	}
	in.SetValue(in.history[in.histPos])
}

func (in *input) View() string { return in.ta.View() }

func (in *input) Height() int { return in.ta.Height() }
