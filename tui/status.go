package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/charmbracelet/lipgloss"
	xansi "github.com/charmbracelet/x/ansi"
)

// phase is what the engine is doing, as the status line shows it.
type phase int

const (
	phaseLoading phase = iota
	phaseReady
	phaseGenerating
	phaseStopping
	phaseFailed  // a fatal engine error: nothing more can be generated
	phaseNoModel // no model loaded: a /backend or /model switch may load one
)

// noModelHelp is what a chat without a model tells the user to do.
const noModelHelp = "no model is loaded: /backend cpu or /model NAME loads one"

// statusLine is the bottom bar: what the engine is doing and the numbers
// people ask for (decode speed live, prefill speed and time to first token
// after a reply, context and KV cache use).
type statusLine struct {
	phase    phase
	load     engine.LoadProgress
	prefill  engine.PrefillProgress
	stats    engine.Stats
	hasStats bool
	info     *engine.ModelInfo
	note     string // a transient message ("copied", "press ctrl+c again")
	noteErr  bool
	// unsaved says that messages are not in the database yet; it stays
	// until they are.
	unsaved string
	// warning is a standing warning (the context filling): it stays while
	// it holds, where a note expires (noteLifetime).
	warning string
}

// View renders the bar at width. Segments are dropped from the least
// important end until the bar fits, so it works down to 60 columns.
func (s *statusLine) View(st *Styles, width int, following bool) string {
	badge := s.badge(st)
	segments := s.segments()
	if !following {
		segments = append([]string{"↓ more below (ctrl+end)"}, segments...)
	}
	// A standing warning (the context filling) comes before the readouts
	// and after any note, in the warning colour.
	if s.warning != "" {
		segments = append([]string{s.warning}, segments...)
	}
	// Unsaved messages outrank a transient note: both show, the warning
	// first, as it stays until the messages are saved.
	note, noteErr := s.note, s.noteErr
	if s.unsaved != "" {
		note, noteErr = s.unsaved, true
		if s.note != "" {
			note += " · " + s.note
		}
	}
	if note != "" {
		segments = append([]string{note}, segments...)
	}
	warnAt := -1
	if s.warning != "" {
		warnAt = 0
		if note != "" {
			warnAt = 1
		}
	}
	sep := " │ "
	line := badge
	for i, seg := range segments {
		style := st.Status
		switch {
		case i == 0 && note != "":
			if noteErr {
				style = st.Busy
			}
			// A note (an error above all) must be seen: cut it to the
			// room left rather than drop it like the other segments.
			room := width - lipgloss.Width(line+st.Status.Render(sep))
			seg = xansi.Truncate(seg, max(room, 0), "…")
		case i == warnAt:
			style = st.Busy
		}
		candidate := line + st.Status.Render(sep) + style.Render(seg)
		if lipgloss.Width(candidate) > width {
			continue
		}
		line = candidate
	}
	pad := width - lipgloss.Width(line)
	if pad > 0 {
		line += st.Status.Render(strings.Repeat(" ", pad))
	}
	return line
}

func (s *statusLine) badge(st *Styles) string {
	switch s.phase {
	case phaseLoading:
		if s.load.Total > 0 {
			return st.Busy.Render(fmt.Sprintf(" ◌ loading %d%% ", percent(s.load.Done, s.load.Total)))
		}
		return st.Busy.Render(" ◌ loading ")
	case phaseGenerating:
		if s.prefill.Total > 0 && s.prefill.Done < s.prefill.Total {
			return st.Busy.Render(fmt.Sprintf(" ● reading prompt %d%% ", percent(int64(s.prefill.Done), int64(s.prefill.Total))))
		}
		return st.Busy.Render(" ● generating ")
	case phaseStopping:
		return st.Busy.Render(" ■ stopping ")
	case phaseFailed:
		return st.Error.Inherit(st.Status).Render(" ✗ engine stopped ")
	case phaseNoModel:
		return st.Error.Inherit(st.Status).Render(" ✗ no model ")
	}
	return st.StatusKey.Render(" ✓ ready ")
}

// segments lists the readouts, most important first. The context and KV
// gauges are the last known (a reply's numbers replace them), so they
// never drop to zero while the next prompt is read; the speeds are the
// current reply's, once it has some.
func (s *statusLine) segments() []string {
	var out []string
	st := s.stats
	if s.hasStats && st.DecodeTokens > 0 {
		out = append(out, fmt.Sprintf("%.1f tok/s", st.DecodeTPS))
	}
	out = append(out, s.gauges()...)
	if !s.hasStats {
		return out
	}
	if st.Drafted > 0 {
		// Speculative decoding: drafted tokens the model accepted.
		out = append(out, fmt.Sprintf("spec %d/%d %.0f%%", st.Accepted, st.Drafted, 100*st.AcceptRate()))
	}
	if st.PrefillTokens > 0 && st.TTFT > 0 {
		out = append(out, fmt.Sprintf("prefill %.0f tok/s", st.PrefillTPS), "first token "+formatDuration(st.TTFT))
	}
	return out
}

// gauges are the context and memory readouts: the context in use of its
// size, and the KV cache (and a recurrent model's state) of what the
// model allocated, one total whether a reply runs or not.
func (s *statusLine) gauges() []string {
	st := s.stats
	size, kvAlloc := st.ContextSize, st.KVAllocBytes
	recurrent, stateMax := st.StateBytes, st.StateMaxBytes
	if s.info != nil {
		size, kvAlloc = s.info.ContextSize, s.info.KVAllocBytes
		if st.StateMaxBytes == 0 {
			recurrent, stateMax = s.info.RecurrentBytes, s.info.RecurrentBytes+s.info.SnapshotBytes
		}
	}
	var out []string
	if size > 0 {
		out = append(out, fmt.Sprintf("ctx %d/%d", min(st.ContextUsed, size), size))
	}
	switch {
	case stateMax > 0:
		out = append(out, fmt.Sprintf("KV+state %s/%s", formatBytes(st.KVUsedBytes+recurrent), formatBytes(kvAlloc+stateMax)))
	case kvAlloc > 0:
		used := "0"
		if st.KVUsedBytes > 0 {
			used = formatBytes(st.KVUsedBytes)
		}
		out = append(out, fmt.Sprintf("KV %s/%s", used, formatBytes(kvAlloc)))
	}
	return out
}

// header is the top bar: the app, the conversation, and what runs it. When
// the width is short the title gives way first (cut, down to a few
// columns), then the thinking label, then the model; the backend goes
// last. Title and the right side stay apart by headerGap columns.
func header(st *Styles, width int, title string, info *engine.ModelInfo, backendNote string) string {
	const headerGap, minTitle = 3, 12
	app := st.Title.Render("bonsai")
	title = printable(strings.Join(strings.Fields(title), " "))
	var model, be string
	if info != nil {
		model = modelLabel(info)
		be = info.Backend
		if info.Backend == "cpu" && info.SIMD != "" {
			be += " " + info.SIMD
		}
		if info.Adapter != "" && info.Backend == "gpu" {
			be += " (" + info.Adapter + ")"
		}
	}
	// Candidates for the right side, most complete first.
	var sides [][]string
	for _, items := range [][]string{{model, be, backendNote}, {model, be}, {be}, nil} {
		var kept []string
		for _, it := range items {
			if it != "" {
				kept = append(kept, it)
			}
		}
		sides = append(sides, kept)
	}
	place := func(side []string, needTitle int) (string, bool) {
		r := st.TitleDim.Render(strings.Join(side, " · "))
		room := width - lipgloss.Width(app) - lipgloss.Width(r)
		if len(side) > 0 {
			room -= headerGap
		}
		left := app
		if title != "" {
			t := " · " + title
			if room < min(lipgloss.Width(t), needTitle) {
				return "", false
			}
			left += st.TitleDim.Render(truncate(t, room))
		} else if room < 0 {
			return "", false
		}
		if len(side) == 0 {
			return truncate(left, width), true
		}
		return left + strings.Repeat(" ", max(width-lipgloss.Width(left)-lipgloss.Width(r), 1)) + r, true
	}
	// The whole title beside the model and backend (with the thinking
	// label if it fits); a cut one; then the backend alone, then nothing.
	for _, try := range []struct{ need, from, to int }{
		{math.MaxInt, 0, 2}, {lipgloss.Width(" · ") + minTitle, 0, 3}, {0, 2, 4},
	} {
		for _, side := range sides[try.from:try.to] {
			if h, ok := place(side, try.need); ok {
				return h
			}
		}
	}
	return truncate(app, width)
}

func percent(done, total int64) int {
	if total <= 0 {
		return 0
	}
	return int(min(100, max(0, done*100/total)))
}

// formatBytes shows a byte count in the unit llama.cpp's memory breakdown
// uses (MiB), or GiB when large.
func formatBytes(n int64) string {
	switch {
	case n >= 10<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "n/a"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// truncate cuts s to width columns, with an ellipsis when it cuts.
func truncate(s string, width int) string {
	if lipgloss.Width(s) <= width {
		return s
	}
	return xansi.Truncate(s, max(width, 0), "…")
}

// emptyLoad is the progress shown before the engine's first report.
var emptyLoad = engine.LoadProgress{Stage: "starting"}

// modelLabel names a model in a few words: its Bonsai variant when it is
// one, else its own name (a variant such as "Qwen3 (other)" says nothing
// about which file runs).
func modelLabel(info *engine.ModelInfo) string {
	switch {
	case info == nil:
		return "the old model"
	case info.Variant != "" && !strings.HasSuffix(info.Variant, "(other)"):
		return info.Variant
	case info.Name != "":
		return info.Name
	}
	return info.Variant
}
