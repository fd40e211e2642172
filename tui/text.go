package tui

import (
	"strings"
	"unicode/utf8"
)

// printable makes model output safe to put on a terminal. A model can emit
// any byte: a carriage return, a vertical tab or form feed (which terminals
// treat as line feeds, scrolling the whole screen), or an escape sequence
// that would restyle or move the cursor. Newlines and tabs stay; carriage
// returns are dropped (so "\r\n" reads as a newline); other control
// characters become their visible Unicode "control picture" (␛ for ESC);
// invalid UTF-8 becomes U+FFFD. The transcript keeps the raw text (it is
// what the model saw and will see again); only the display is cleaned.
//
// The emoji and text variation selectors (U+FE0F, U+FE0E) are dropped: the
// width libraries disagree on "❤️" (lipgloss counts 2 columns, the textarea
// and the wrapper 1), and terminals too, so lines holding one came out
// misaligned; without it every side counts the base character alike.
//
// Each code point maps on its own, so cleaning a prefix gives a prefix of the
// cleaned whole, which the streaming renderer relies on.
func printable(s string) string {
	if isPrintable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('␡')
		case r >= 0x80 && r < 0xa0:
			b.WriteRune(utf8.RuneError)
		case isVariationSelector(r):
		default:
			b.WriteRune(r) // includes RuneError for invalid bytes
		}
	}
	return b.String()
}

// Printable is printable for the other commands that put stored text on a
// terminal (bonsai sessions, export).
func Printable(s string) string { return printable(s) }

// printableLine is printable on one line, for a name in a bar or a panel.
func printableLine(s string) string { return printable(strings.Join(strings.Fields(s), " ")) }

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return false
		}
		if c >= 0x80 {
			return isPrintableUTF8(s[i:])
		}
	}
	return true
}

func isPrintableUTF8(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 || isVariationSelector(r) {
			return false
		}
		i += size
	}
	return true
}

func isVariationSelector(r rune) bool { return r == 0xFE0F || r == 0xFE0E }
