package tui

import (
	"github.com/charmbracelet/glamour/ansi"
	glamourstyles "github.com/charmbracelet/glamour/styles"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles holds every lipgloss style the panels use, so that a theme is one
// value and the panels never pick colours themselves. Colours are adaptive:
// lipgloss chooses the light or dark variant from the terminal's background,
// and under NO_COLOR (an Ascii profile) they vanish while bold and faint stay.
type Styles struct {
	Title     lipgloss.Style
	TitleDim  lipgloss.Style
	Status    lipgloss.Style
	StatusKey lipgloss.Style
	Busy      lipgloss.Style
	Good      lipgloss.Style
	Warn      lipgloss.Style
	Error     lipgloss.Style
	Dim       lipgloss.Style
	Notice    lipgloss.Style
	Thinking  lipgloss.Style
	UserLabel lipgloss.Style
	BotLabel  lipgloss.Style
	UserText  lipgloss.Style
	Panel     lipgloss.Style
	PanelHead lipgloss.Style
	Bar       lipgloss.Style
	BarEmpty  lipgloss.Style
	Selected  lipgloss.Style
	HelpKey   lipgloss.Style
	HelpDesc  lipgloss.Style
	Overlay   lipgloss.Style
	Prompt    lipgloss.Style
}

var (
	accent    = lipgloss.AdaptiveColor{Light: "#1B6E3A", Dark: "#7FD49B"}
	accentAlt = lipgloss.AdaptiveColor{Light: "#5A3E9B", Dark: "#B4A0F0"}
	subtle    = lipgloss.AdaptiveColor{Light: "#8A8A8A", Dark: "#707070"}
	textMuted = lipgloss.AdaptiveColor{Light: "#555555", Dark: "#A8A8A8"}
	warnCol   = lipgloss.AdaptiveColor{Light: "#9A6700", Dark: "#E3B341"}
	errCol    = lipgloss.AdaptiveColor{Light: "#B42318", Dark: "#FF7B72"}
	barBg     = lipgloss.AdaptiveColor{Light: "#E8E8E8", Dark: "#262626"}
	barFg     = lipgloss.AdaptiveColor{Light: "#303030", Dark: "#D0D0D0"}
	border    = lipgloss.AdaptiveColor{Light: "#BBBBBB", Dark: "#4A4A4A"}
)

// DefaultStyles is bonsai's theme.
func DefaultStyles() Styles {
	return Styles{
		Title:     lipgloss.NewStyle().Bold(true).Foreground(accent),
		TitleDim:  lipgloss.NewStyle().Foreground(textMuted),
		Status:    lipgloss.NewStyle().Background(barBg).Foreground(barFg),
		StatusKey: lipgloss.NewStyle().Bold(true).Background(barBg).Foreground(accent),
		Busy:      lipgloss.NewStyle().Bold(true).Background(barBg).Foreground(warnCol),
		Good:      lipgloss.NewStyle().Background(barBg).Foreground(accent),
		Warn:      lipgloss.NewStyle().Foreground(warnCol),
		Error:     lipgloss.NewStyle().Bold(true).Foreground(errCol),
		Dim:       lipgloss.NewStyle().Foreground(subtle),
		Notice:    lipgloss.NewStyle().Foreground(textMuted),
		Thinking:  lipgloss.NewStyle().Faint(true).Italic(true).Foreground(textMuted),
		UserLabel: lipgloss.NewStyle().Bold(true).Foreground(accentAlt),
		BotLabel:  lipgloss.NewStyle().Bold(true).Foreground(accent),
		UserText:  lipgloss.NewStyle(),
		Panel:     lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(border).Padding(0, 1),
		PanelHead: lipgloss.NewStyle().Bold(true).Foreground(accent),
		Bar:       lipgloss.NewStyle().Foreground(accent),
		BarEmpty:  lipgloss.NewStyle().Foreground(subtle),
		Selected:  lipgloss.NewStyle().Bold(true).Reverse(true),
		HelpKey:   lipgloss.NewStyle().Bold(true).Foreground(accentAlt),
		HelpDesc:  lipgloss.NewStyle().Foreground(textMuted),
		Overlay:   lipgloss.NewStyle().Border(lipgloss.DoubleBorder()).BorderForeground(accent).Padding(0, 2),
		Prompt:    lipgloss.NewStyle().Bold(true).Foreground(accentAlt),
	}
}

// markdownStyle picks glamour's dark or light style. Under NO_COLOR the
// Ascii profile drops the colours but keeps bold and italics, which is what
// NO_COLOR asks for (glamour's "notty" style would print the ** markers).
// Document margins are dropped because the conversation panel indents
// replies itself.
func markdownStyle(profile termenv.Profile, dark bool) ansi.StyleConfig {
	s := glamourstyles.LightStyleConfig
	if dark || profile == termenv.Ascii {
		s = glamourstyles.DarkStyleConfig
	}
	zero := uint(0)
	s.Document.Margin = &zero
	s.Document.BlockPrefix = ""
	s.Document.BlockSuffix = ""
	return s
}
