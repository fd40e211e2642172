package tui

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	tea "github.com/charmbracelet/bubbletea"
)

// chatSetting is one setting /set changes for this chat: how a value is
// read into the sampling of a reply (or its token limit), and how the
// value in force is shown.
type chatSetting struct {
	name, help string
	// set applies a value; a value it cannot take is an error in the
	// user's words.
	set func(r *replySettings, v string) error
	// show is the value in force.
	show func(r replySettings) string
}

// replySettings are what one reply runs with.
type replySettings struct {
	sampling  engine.Sampling
	maxTokens int
	// randomSeed: no seed was set; each reply draws one.
	randomSeed bool
}

var chatSettings = []chatSetting{
	{name: "temperature", help: "0 is greedy; higher, more varied",
		set:  floatSetting(func(r *replySettings) *float32 { return &r.sampling.Temperature }, 0, 100),
		show: func(r replySettings) string { return formatFloat(r.sampling.Temperature) }},
	{name: "top_p", help: "nucleus: the smallest set of tokens holding this much probability (1: off)",
		set:  floatSetting(func(r *replySettings) *float32 { return &r.sampling.TopP }, 0, 1),
		show: func(r replySettings) string { return formatFloat(r.sampling.TopP) }},
	{name: "top_k", help: "the k likeliest tokens only (0: off)",
		set:  intSetting(func(r *replySettings) *int { return &r.sampling.TopK }, 0, 1<<20),
		show: func(r replySettings) string { return strconv.Itoa(r.sampling.TopK) }},
	{name: "min_p", help: "drop tokens below this share of the likeliest (0: off)",
		set:  floatSetting(func(r *replySettings) *float32 { return &r.sampling.MinP }, 0, 1),
		show: func(r replySettings) string { return formatFloat(r.sampling.MinP) }},
	{name: "repeat_penalty", help: "divides the logits of recent tokens (1: off)",
		set:  floatSetting(func(r *replySettings) *float32 { return &r.sampling.RepeatPenalty }, 0, 100),
		show: func(r replySettings) string { return formatFloat(r.sampling.RepeatPenalty) }},
	{name: "seed", help: "a number repeats a reply; random draws one per reply",
		set: func(r *replySettings, v string) error {
			if v == "random" || v == "-1" {
				r.randomSeed = true
				return nil
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("seed %q: a whole number ≥ 0, or random", v)
			}
			r.sampling.Seed, r.randomSeed = n, false
			return nil
		},
		show: func(r replySettings) string {
			if r.randomSeed {
				return "random (one per reply)"
			}
			return strconv.FormatUint(r.sampling.Seed, 10)
		}},
	{name: "max_tokens", help: "the longest reply in tokens (0: until the turn or the context ends)",
		set: intSetting(func(r *replySettings) *int { return &r.maxTokens }, 0, 1<<30),
		show: func(r replySettings) string {
			if r.maxTokens == 0 {
				return "0 (no limit)"
			}
			return strconv.Itoa(r.maxTokens)
		}},
}

// settingNames lists what /set takes, for completion and messages.
func settingNames() []string {
	names := []string{"system"}
	for _, s := range chatSettings {
		names = append(names, s.name)
	}
	return names
}

func findSetting(name string) (chatSetting, bool) {
	for _, s := range chatSettings {
		if s.name == name {
			return s, true
		}
	}
	return chatSetting{}, false
}

func floatSetting(field func(*replySettings) *float32, lo, hi float64) func(*replySettings, string) error {
	return func(r *replySettings, v string) error {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || math.IsNaN(f) || f < lo || f > hi {
			return fmt.Errorf("%q: a number from %s to %s", v, formatFloat(float32(lo)), formatFloat(float32(hi)))
		}
		*field(r) = float32(f)
		return nil
	}
}

func intSetting(field func(*replySettings) *int, lo, hi int) func(*replySettings, string) error {
	return func(r *replySettings, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("%q: a whole number from %d to %d", v, lo, hi)
		}
		*field(r) = n
		return nil
	}
}

func formatFloat(f float32) string { return strconv.FormatFloat(float64(f), 'g', 4, 32) }

// baseSettings are what a reply runs with before this chat's /set: the
// model's recommendation under the configuration (Options.Sampling) and
// Options.MaxTokens.
func (m *Model) baseSettings() replySettings {
	var model engine.Sampling
	if m.info != nil {
		model = m.info.Sampling
	}
	r := replySettings{sampling: model, maxTokens: m.opts.MaxTokens, randomSeed: true}
	if m.opts.Sampling != nil {
		r.sampling = m.opts.Sampling(model)
		r.randomSeed = m.opts.SettingOrigin == nil || m.opts.SettingOrigin("seed") == ""
	}
	return r
}

// replySettings are what the next reply runs with: the base, then this
// chat's /set values. A stored value this build cannot take (written by
// another version) is skipped.
func (m *Model) replySettings() replySettings {
	r := m.baseSettings()
	for _, s := range chatSettings {
		if v, ok := m.overrides[s.name]; ok {
			_ = s.set(&r, v)
		}
	}
	if _, ok := m.overrides["seed"]; ok && r.randomSeed {
		r.sampling.Seed = rand.Uint64() // the seed rule: a fresh one per reply
	}
	return r
}

// setSetting runs /set NAME VALUE: for this chat, saved with it. "/set
// NAME default" goes back to the configuration's (or the model's) value;
// /set alone shows what is in force.
func (m *Model) setSetting(arg string) tea.Cmd {
	name, value, _ := strings.Cut(strings.TrimSpace(arg), " ")
	name, value = strings.ToLower(name), strings.TrimSpace(value)
	if name == "" {
		return m.showSettings()
	}
	if name == "system" {
		if value == "" {
			return m.showSystem()
		}
		return m.runSlash("system", value)
	}
	s, ok := findSetting(name)
	if !ok {
		return m.notify(fmt.Sprintf("/set: no setting %q (%s)", name, strings.Join(settingNames(), ", ")), true)
	}
	if value == "" {
		return m.notify(fmt.Sprintf("/set %s VALUE: %s (now %s; /set %s default undoes /set)", name, s.help, s.show(m.replySettings()), name), true)
	}
	if value == "default" {
		delete(m.overrides, name)
		m.saveSettings()
		return m.notify(fmt.Sprintf("%s back to %s", name, s.show(m.replySettings())), false)
	}
	r := m.replySettings()
	if err := s.set(&r, value); err != nil {
		return m.notify("/set "+name+" "+err.Error(), true)
	}
	if err := r.sampling.Params().Validate(); err != nil {
		return m.notify("/set "+name+": "+err.Error(), true)
	}
	if m.overrides == nil {
		m.overrides = session.Settings{}
	}
	m.overrides[name] = value
	m.saveSettings()
	return m.notify(fmt.Sprintf("%s = %s from the next reply (saved with this chat)", name, s.show(r)), false)
}

// showSettings lists the settings in force and where each comes from.
func (m *Model) showSettings() tea.Cmd {
	r := m.replySettings()
	var b strings.Builder
	b.WriteString("Settings in force (/set NAME VALUE changes one for this chat, /set NAME default undoes it):")
	if m.info != nil {
		// Named once here: on every row it made the rows wrap in a chat
		// column beside the info panel.
		fmt.Fprintf(&b, "\n  the model's recommendations are %s's", modelLabel(m.info))
	}
	for _, s := range chatSettings {
		fmt.Fprintf(&b, "\n  %-15s %-22s %s", s.name, s.show(r), m.settingOrigin(s.name))
	}
	system := "none"
	if m.system != "" {
		system = fmt.Sprintf("%q", truncate(strings.Join(strings.Fields(m.system), " "), 60))
	}
	fmt.Fprintf(&b, "\n  %-15s %s", "system", system)
	m.conv.Notice(b.String())
	m.conv.Bottom()
	return nil
}

// settingOrigin says where the value of name in force comes from.
func (m *Model) settingOrigin(name string) string {
	if _, ok := m.overrides[name]; ok {
		return "/set in this chat"
	}
	if m.opts.SettingOrigin != nil {
		if o := m.opts.SettingOrigin(name); o != "" {
			return o
		}
	}
	switch {
	case name == "max_tokens" || name == "seed":
		return "default"
	}
	return "the model's recommendation"
}

// saveSettings stores this chat's /set values with its session, once it
// has one (a chat not yet saved stores them with its first message).
func (m *Model) saveSettings() {
	store, id := m.opts.Store, m.sessionID
	if store == nil || id == 0 {
		return
	}
	settings := maps.Clone(m.overrides)
	m.bg.Do(func() tea.Msg {
		if err := store.SetSettings(context.Background(), id, settings); err != nil {
			return saveErrMsg{fmt.Errorf("the chat's settings were not saved: %w", err)}
		}
		return nil
	})
}

// settingsLoadedMsg brings a resumed session's settings.
type settingsLoadedMsg struct {
	id       int64
	settings session.Settings
	err      error
}

// loadSettings reads a resumed session's /set values.
func (m *Model) loadSettings(id int64) tea.Cmd {
	store := m.opts.Store
	if store == nil || id == 0 {
		return nil
	}
	return func() tea.Msg {
		s, err := store.Settings(context.Background(), id)
		return settingsLoadedMsg{id: id, settings: s, err: err}
	}
}

func (m *Model) settingsLoaded(msg settingsLoadedMsg) tea.Cmd {
	if msg.id != m.sessionID {
		return nil // another chat was opened meanwhile
	}
	if msg.err != nil {
		return m.notify(msg.err.Error()+" (this chat runs with the defaults)", true)
	}
	m.overrides = msg.settings
	if len(m.overrides) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(m.overrides))
	var parts []string
	for _, n := range names {
		parts = append(parts, n+" "+m.overrides[n])
	}
	m.conv.Notice("This chat's settings: " + strings.Join(parts, ", ") + " (/show lists all).")
	return nil
}
