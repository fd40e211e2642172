package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/config/atomicfile"
	"github.com/bonsai-chat/bonsai/infer/chat"
)

// Format is an export format.
type Format string

// Export formats.
const (
	Markdown Format = "md"
	JSON     Format = "json"
)

// ErrUnknownFormat: ParseFormat got something other than md or json.
var ErrUnknownFormat = errors.New("unknown export format (want md or json)")

// ParseFormat accepts "md", "markdown" and "json".
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "md", "markdown":
		return Markdown, nil
	case "json":
		return JSON, nil
	}
	return "", fmt.Errorf("%q: %w", s, ErrUnknownFormat)
}

// FormatOf picks the export format from a file name: .md or .markdown is
// Markdown, .json is JSON, and a name without an extension is Markdown.
// Any other extension is refused, naming it, rather than writing Markdown
// into a file whose name says otherwise.
func FormatOf(path string) (Format, error) {
	ext := filepath.Ext(path)
	if ext == "" {
		return Markdown, nil
	}
	f, err := ParseFormat(ext[1:])
	if err != nil {
		return "", fmt.Errorf("%s: extension %q: %w", path, ext, ErrUnknownFormat)
	}
	return f, nil
}

// Export writes the session to path in the given format, atomically: the
// file is either the complete export or untouched.
func Export(s *Session, f Format, path string) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return Write(w, s, f) })
}

// Write writes the session in the given format.
func Write(w io.Writer, s *Session, f Format) error {
	switch f {
	case Markdown:
		return WriteMarkdown(w, s)
	case JSON:
		return WriteJSON(w, s)
	}
	return fmt.Errorf("%q: %w", f, ErrUnknownFormat)
}

// exported is the JSON export's shape; it is a stable file format, kept apart
// from the Go types.
type exported struct {
	ID       int64             `json:"id"`
	Title    string            `json:"title"`
	Model    string            `json:"model,omitempty"`
	Variant  string            `json:"variant,omitempty"`
	Backend  string            `json:"backend,omitempty"`
	Created  time.Time         `json:"created"`
	Updated  time.Time         `json:"updated"`
	Messages []exportedMessage `json:"messages"`
}

type exportedMessage struct {
	Role        string         `json:"role"`
	Content     string         `json:"content"`
	Thinking    string         `json:"thinking,omitempty"`
	Stopped     bool           `json:"stopped,omitempty"`
	Interrupted bool           `json:"interrupted,omitempty"`
	Model       string         `json:"model,omitempty"`
	Variant     string         `json:"variant,omitempty"`
	Backend     string         `json:"backend,omitempty"`
	Stats       *exportedStats `json:"stats,omitempty"`
	Created     time.Time      `json:"created"`
}

type exportedStats struct {
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"generated_tokens"`
	PrefillTPS   float64 `json:"prefill_tokens_per_second"`
	DecodeTPS    float64 `json:"decode_tokens_per_second"`
	TTFTMillis   float64 `json:"time_to_first_token_ms"`
}

// WriteJSON writes the session as one indented JSON object.
func WriteJSON(w io.Writer, s *Session) error {
	out := exported{
		ID: s.ID, Title: s.Title, Model: s.Model, Variant: s.Variant, Backend: s.Backend,
		Created: s.Created.UTC(), Updated: s.Updated.UTC(), Messages: []exportedMessage{},
	}
	for _, m := range s.Turns {
		em := exportedMessage{
			Role: m.Role, Content: m.Content, Thinking: m.Thinking,
			Stopped: m.Stopped, Interrupted: m.Interrupted,
			Model: m.Model, Variant: m.Variant, Backend: m.Backend, Created: m.Created.UTC(),
		}
		if m.Stats != (Stats{}) {
			em.Stats = &exportedStats{
				PromptTokens: m.Stats.PromptTokens, GenTokens: m.Stats.GenTokens,
				PrefillTPS: m.Stats.PrefillTPS, DecodeTPS: m.Stats.DecodeTPS,
				TTFTMillis: float64(m.Stats.TTFT) / float64(time.Millisecond),
			}
		}
		out.Messages = append(out.Messages, em)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteMarkdown writes the session as a readable transcript: a heading per
// turn, thinking in a collapsible <details> block, stats in italics.
func WriteMarkdown(w io.Writer, s *Session) error {
	var b strings.Builder
	title := s.Title
	if title == "" {
		title = "Untitled conversation"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	fmt.Fprintf(&b, "*Session %d, started %s", s.ID, s.Created.UTC().Format("2006-01-02 15:04 MST"))
	if s.Model != "" {
		fmt.Fprintf(&b, ", model %s", s.Model)
	}
	b.WriteString("*\n")
	for _, m := range s.Turns {
		fmt.Fprintf(&b, "\n## %s\n\n", roleHeading(m.Role))
		if m.Thinking != "" {
			fmt.Fprintf(&b, "<details><summary>Thinking</summary>\n\n%s\n\n</details>\n\n", strings.TrimSpace(m.Thinking))
		}
		if c := strings.TrimSpace(m.Content); c != "" {
			b.WriteString(c + "\n")
		}
		var notes []string
		if m.Stopped {
			notes = append(notes, "stopped")
		}
		if m.Interrupted {
			notes = append(notes, "interrupted")
		}
		if m.Stats.GenTokens > 0 {
			notes = append(notes, fmt.Sprintf("%d tokens, %.1f tok/s, first token after %s",
				m.Stats.GenTokens, m.Stats.DecodeTPS, m.Stats.TTFT.Round(time.Millisecond)))
		}
		if len(notes) > 0 {
			fmt.Fprintf(&b, "\n*%s*\n", strings.Join(notes, "; "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func roleHeading(role string) string {
	switch role {
	case chat.RoleUser:
		return "User"
	case chat.RoleAssistant:
		return "Assistant"
	case chat.RoleSystem:
		return "System"
	}
	return role
}
