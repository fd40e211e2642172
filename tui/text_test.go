package tui

import (
	"github.com/charmbracelet/lipgloss"
	"github.com/mattn/go-runewidth"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	tests := map[string]string{
		"plain text":            "plain text",
		"line\r\nbreak":         "line\nbreak",
		"tab\there":             "tab\there",
		"esc \x1b[2J clears":    "esc ␛[2J clears",
		"vertical\x0btab":       "vertical␋tab",
		"form\x0cfeed":          "form␌feed",
		"bell\x07":              "bell␇",
		"del\x7f":               "del␡",
		"c1 \u009b":             "c1 \uFFFD",
		"bad \xff utf8":         "bad \uFFFD utf8",
		"ünïcødé and 中文 🍀":      "ünïcødé and 中文 🍀",
		"love \u2764\ufe0f you": "love \u2764 you",
		"text \u263a\ufe0e":     "text \u263a",
	}
	for in, want := range tests {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzPrintable checks that cleaned text has no control characters but
// newlines and tabs, and that cleaning preserves prefixes.
// Every width measure agrees on what printable leaves: lipgloss (the
// layout) and go-runewidth (the textarea and the wrapper).
func TestPrintableWidthsAgree(t *testing.T) {
	for _, s := range []string{"I \u2764\ufe0f Go", "\u263a\ufe0f ok", "\u270c\ufe0f\u2b50", "plain"} {
		p := printable(s)
		if a, b := lipgloss.Width(p), runewidth.StringWidth(p); a != b {
			t.Errorf("%q: lipgloss width %d, runewidth %d", p, a, b)
		}
	}
}

func FuzzPrintable(f *testing.F) {
	f.Add("a\r\nb\x1b[31m\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := printable(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		for _, r := range out {
			if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 {
				t.Fatalf("control %U left in %q", r, out)
			}
		}
		for i := 0; i <= len(s); i++ {
			if utf8.ValidString(s[:i]) && !strings.HasPrefix(out, printable(s[:i])) {
				t.Fatalf("printable(%q) is not a prefix of printable(%q)", s[:i], s)
			}
		}
	})
}
