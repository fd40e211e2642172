package tui

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	tests := map[string]string{
		"plain text":         "plain text",
		"line\r\nbreak":      "line\nbreak",
		"tab\there":          "tab\there",
		"esc \x1b[2J clears": "esc ␛[2J clears",
		"vertical\x0btab":    "vertical␋tab",
		"form\x0cfeed":       "form␌feed",
		"bell\x07":           "bell␇",
		"del\x7f":            "del␡",
		"c1 \u009b":          "c1 \uFFFD",
		"bad \xff utf8":      "bad \uFFFD utf8",
		"ünïcødé and 中文 🍀":   "ünïcødé and 中文 🍀",
	}
	for in, want := range tests {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzPrintable checks that cleaned text has no control characters but
// newlines and tabs, and that cleaning preserves prefixes.
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
