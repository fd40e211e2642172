package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/charmbracelet/lipgloss"
)

// backendPanel shows where the model runs and lets the user see a backend
// switch progress. It only formats what Loaded and LoadProgress reported.
type backendPanel struct {
	info      *engine.ModelInfo
	switching string // backend being loaded, "" when none
	load      engine.LoadProgress
	lastErr   string
	// compact leaves out the backend's details (1), or all but the
	// backend and why (2), so that the profile panel below fits too.
	compact int
}

// backendCompactest is the most compact backend panel.
const backendCompactest = 2

func (p *backendPanel) View(st *Styles, width int) string {
	inner := max(width-4, 20) // border and padding
	var b strings.Builder
	b.WriteString(st.PanelHead.Render("Backend") + st.Dim.Render("  /backend cpu|gpu") + "\n")
	if p.switching != "" {
		b.WriteString(fmt.Sprintf("switching to %s: %s\n", p.switching, p.load.Stage))
		b.WriteString(progressBar(st, inner, p.load.Done, p.load.Total) + "\n")
	}
	if p.lastErr != "" {
		b.WriteString(st.Error.Width(inner).Render(p.lastErr) + "\n")
	}
	info := p.info
	if info == nil {
		b.WriteString(st.Dim.Render("no model loaded yet"))
		return st.Panel.Width(width - 2).Render(b.String())
	}
	adapter := info.Adapter
	if isSoftwareAdapter(adapter) {
		adapter += " — a software rasterizer, slower than the CPU backend"
	}
	rows := [][2]string{
		{"backend", info.Backend},
		{"adapter", adapter},
	}
	if info.Backend == "cpu" {
		cpu := fmt.Sprintf("%d worker threads", info.Threads)
		if info.SIMD != "" {
			cpu += " · " + info.SIMD
		}
		rows = append(rows, [2]string{"cpu", cpu})
	}
	model := info.Name
	if info.Variant != "" && info.Variant != info.Name {
		model += " · " + info.Variant
	}
	if info.Params > 0 {
		model += fmt.Sprintf(" · %s params", formatCount(info.Params))
	}
	rows = append(rows,
		[2]string{"model", model},
		[2]string{"weights", fmt.Sprintf("%s (file %s)", formatBytes(info.WeightBytes), formatBytes(info.FileBytes))},
		[2]string{"context", fmt.Sprintf("%d tokens · KV %s", info.ContextSize, formatBytes(info.KVAllocBytes))},
	)
	if info.RecurrentBytes > 0 {
		rows = append(rows, [2]string{"state", fmt.Sprintf("recurrent %s · snapshots ≤ %s", formatBytes(info.RecurrentBytes), formatBytes(info.SnapshotBytes))})
	}
	// The backend's own lines: one under a row's key adds to that row; a
	// short key is a row of its own; the rest are notes under the table, so
	// that no long key squeezes the values into a strip. A line a row
	// already says is left out.
	var notes []string
	details := info.Details
	if p.compact >= backendCompactest {
		rows = rows[:1]
	}
	if p.compact > 0 {
		details = nil
		for _, d := range info.Details {
			if strings.HasPrefix(d, "auto:") {
				details = append(details, d) // why it runs where it does stays
			}
		}
		notes = append(notes, "(more with the profile panel closed)")
	}
detail:
	for _, d := range details {
		for _, r := range rows {
			if strings.Contains(r[1], d) {
				continue detail
			}
		}
		k, v, ok := strings.Cut(d, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || len(k) > maxKeyWidth:
			notes = append(notes, d)
			continue
		}
		for i := range rows {
			if rows[i][0] == k {
				rows[i][1] += "; " + v
				continue detail
			}
		}
		rows = append(rows, [2]string{k, v})
	}
	b.WriteString(table(st, rows, inner))
	for _, n := range notes {
		b.WriteString("\n" + st.Dim.Width(inner).Render(n))
	}
	return st.Panel.Width(width - 2).Render(b.String())
}

// maxKeyWidth is the longest key the backend panel's table takes; a longer
// one would leave its values a narrow strip.
const maxKeyWidth = 10

// isSoftwareAdapter recognises the CPU-emulated Vulkan and WebGPU adapters
// by the names their drivers give.
func isSoftwareAdapter(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"llvmpipe", "lavapipe", "swiftshader", "software"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// profilePanel shows where the time of a token goes, phase by phase: the
// decoding steps timed so far (summed over the samples, since on the GPU
// only one step in many is timed and a short reply may hold none), and
// the last prompt's passes until a step is timed.
type profilePanel struct {
	decode profile.Sample // decoding steps, summed since profiling began
	prompt profile.Sample // the last prompt read
}

// add takes one ProfileSample: a sample without timed tokens changes
// nothing (it used to blank the panel).
func (p *profilePanel) add(ev engine.ProfileSample) {
	s := ev.Sample
	switch {
	case s.Tokens == 0:
	case ev.Prompt:
		p.prompt = s
	default:
		for ph := range s.Phases {
			p.decode.Phases[ph] += s.Phases[ph]
		}
		p.decode.Tokens += s.Tokens
		p.decode.Source = s.Source
	}
}

// reset forgets the samples (another model or backend).
func (p *profilePanel) reset() { *p = profilePanel{} }

func (p *profilePanel) View(st *Styles, width int) string {
	inner := max(width-4, 20)
	var b strings.Builder
	s, what := &p.decode, "decoding, per token"
	if s.Tokens == 0 {
		s, what = &p.prompt, "reading the prompt, per token"
	}
	b.WriteString(st.PanelHead.Render("Profile") + st.Dim.Render("  "+what) + "\n")
	if s.Tokens == 0 {
		b.WriteString(st.Dim.Width(inner).Render("N/A: no profile samples yet. They arrive with the next reply: its prompt, then its decoding steps."))
		return st.Panel.Width(width - 2).Render(b.String())
	}
	total := s.Total() / time.Duration(s.Tokens)
	const nameW, timeW, pctW = 12, 9, 5
	barW := max(inner-nameW-timeW-pctW-3, 4)
	for ph := profile.Phase(0); ph < profile.NumPhases; ph++ {
		d := s.PerToken(ph)
		frac := 0.0
		if total > 0 {
			frac = float64(d) / float64(total)
		}
		shown := formatDuration(d)
		if d == 0 {
			shown = "0"
		}
		fmt.Fprintf(&b, "%-*s %*s %s %*s\n", nameW, ph.String(), timeW, shown,
			bar(st, barW, frac), pctW, fmt.Sprintf("%.0f%%", frac*100))
	}
	// The phases' sum only: the reply's tok/s (status line) also counts
	// what lies between them, so no rate is derived here to contradict it.
	fmt.Fprintf(&b, "%-*s %*s", nameW, "total", timeW, formatDuration(total))
	b.WriteString("\n" + st.Dim.Width(inner).Render(p.sampled()))
	return st.Panel.Width(width - 2).Render(b.String())
}

// sampled says what the numbers are the mean of.
func (p *profilePanel) sampled() string {
	var parts []string
	if n := p.decode.Tokens; n > 0 {
		parts = append(parts, fmt.Sprintf("mean of %d timed steps · %s", n, p.decode.Source))
	}
	if n := p.prompt.Tokens; n > 0 {
		parts = append(parts, fmt.Sprintf("last prompt: %d tokens, %s per token (%s)", n, formatDuration(p.prompt.Total()/time.Duration(n)), p.prompt.Source))
	}
	return strings.Join(parts, " · ")
}

// table lays out key/value rows with aligned keys, wrapping long values.
func table(st *Styles, rows [][2]string, width int) string {
	keyW := 0
	for _, r := range rows {
		keyW = max(keyW, lipgloss.Width(r[0]))
	}
	valW := max(width-keyW-2, 8)
	var lines []string
	for _, r := range rows {
		if r[1] == "" {
			continue
		}
		key := st.Dim.Render(fmt.Sprintf("%-*s", keyW, r[0]))
		val := lipgloss.NewStyle().Width(valW).Render(r[1])
		lines = append(lines, lipgloss.JoinHorizontal(lipgloss.Top, key, "  ", val))
	}
	return strings.Join(lines, "\n")
}

// bar draws frac (0..1) of width cells.
func bar(st *Styles, width int, frac float64) string {
	frac = min(max(frac, 0), 1)
	full := int(frac*float64(width) + 0.5)
	return st.Bar.Render(strings.Repeat("█", full)) + st.BarEmpty.Render(strings.Repeat("░", width-full))
}

// progressBar draws done/total with the percentage after it.
func progressBar(st *Styles, width int, done, total int64) string {
	if total <= 0 {
		return st.Dim.Render("…")
	}
	label := fmt.Sprintf(" %3d%%", percent(done, total))
	return bar(st, max(width-len(label), 4), float64(done)/float64(total)) + label
}

// formatCount writes a parameter count as people say it (1.7B, 600M).
func formatCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
