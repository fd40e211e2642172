package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	xansi "github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

func TestStableBoundary(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the text before the boundary
	}{
		{"empty", "", ""},
		{"one paragraph", "Hello world", ""},
		{"paragraph then more", "One.\n\nTwo", "One.\n\n"},
		{"blank line not finished", "One.\n", ""},
		{"latest boundary wins", "One.\n\nTwo.\n\nThree", "One.\n\nTwo.\n\n"},
		{"inside an open fence", "Intro.\n\n```go\nx := 1\n\ny := 2", "Intro.\n\n"},
		{"after a closed fence", "```\ncode\n```\n\nAfter", "```\ncode\n```\n\n"},
		{"tilde fence", "~~~\na\n\nb\n~~~\n\nc", "~~~\na\n\nb\n~~~\n\n"},
		{"list continues across blank", "- a\n\n- b", ""},
		{"paragraph before list is fine", "Intro.\n\n- a\n\n- b", ""},
		{"after a list, a paragraph", "- a\n- b\n\nText", ""},
		{"quote", "> q\n\n> r", ""},
		{"indented continuation", "Para.\n\n    code", ""},
		{"table", "| a | b |\n|---|---|\n\nText", ""},
		{"heading", "# Title\n\nBody", "# Title\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.src[:stableBoundary(tc.src)]
			if got != tc.want {
				t.Errorf("stableBoundary(%q) splits after %q, want %q", tc.src, got, tc.want)
			}
		})
	}
}

func TestCodeBlocks(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{"no code", nil},
		{"```go\nfunc f() {}\n```", []string{"func f() {}"}},
		{"a\n```\none\n```\nb\n~~~py\ntwo\nthree\n~~~\n", []string{"one", "two\nthree"}},
		{"````\n```\ninner\n```\n````", []string{"```\ninner\n```"}},
		{"```\nunterminated", []string{"unterminated"}},
	}
	for _, tc := range tests {
		got := codeBlocks(tc.src)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("codeBlocks(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestStreamingMatchesFull streams documents a few bytes at a time and checks
// the final streamed view against a one-shot render: chunking at stable
// boundaries must not change what the reader sees.
func TestStreamingMatchesFull(t *testing.T) {
	docs := []string{
		"# Plan\n\nFirst we **parse** the file.\n\nThen we `mmap` it.\n\n```go\nf, err := os.Open(p)\n\nif err != nil {\n\treturn err\n}\n```\n\nDone.",
		"Intro paragraph that is long enough to wrap across more than one line at forty columns.\n\nSecond paragraph.",
		"- one\n- two\n\n- three\n\nAfter the list.",
	}
	md := newMarkdownRenderer(termenv.Ascii, true)
	for _, doc := range docs {
		var s streamingMarkdown
		// Every frame, not just the last: what the user watches stream
		// must be what the whole text so far renders to.
		for i := 1; i <= len(doc); i += 3 {
			if got, want := s.Render(md, doc[:i], 40), md.Render(doc[:i], 40); got != want {
				t.Fatalf("frame at byte %d differs from the full render of that prefix\nstreamed:\n%s\nfull:\n%s", i, got, want)
			}
		}
		if got, want := s.Render(md, doc, 40), md.Render(doc, 40); got != want {
			t.Errorf("streamed render differs from full render\nstreamed:\n%s\nfull:\n%s", got, want)
		}
	}
}

func TestStreamingRestartsOnWidthChange(t *testing.T) {
	md := newMarkdownRenderer(termenv.Ascii, true)
	var s streamingMarkdown
	doc := "Alpha beta gamma delta epsilon zeta eta theta.\n\nIota kappa."
	s.Render(md, doc, 20)
	if got, want := s.Render(md, doc, 60), md.Render(doc, 60); got != want {
		t.Errorf("after a width change got\n%s\nwant\n%s", got, want)
	}
}

func TestTrimRightKeepingEscapes(t *testing.T) {
	tests := map[string]string{
		"abc   ":                      "abc",
		"\x1b[1mabc\x1b[0m   ":        "\x1b[1mabc\x1b[0m",
		"\x1b[1mabc   \x1b[0m  ":      "\x1b[1mabc\x1b[0m",
		"   ":                         "",
		"a \x1b[31m \x1b[0m \x1b[1m ": "a\x1b[31m\x1b[0m\x1b[1m",
	}
	for in, want := range tests {
		if got := trimRightKeepingEscapes(in); got != want {
			t.Errorf("trimRightKeepingEscapes(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzStreamingMarkdown feeds arbitrary text through the streaming renderer
// in pieces: it must never panic, and boundaries must fall on line starts.
func FuzzStreamingMarkdown(f *testing.F) {
	f.Add("# a\n\nb\n\n```\nc\n\nd\n```\n\ne", 3)
	f.Add("- x\n\n  y\n\n> z", 1)
	f.Add("\n\n\n```", 2)
	md := newMarkdownRenderer(termenv.Ascii, true)
	f.Fuzz(func(t *testing.T, doc string, step int) {
		if len(doc) > 2000 {
			return
		}
		b := stableBoundary(doc)
		if b < 0 || b > len(doc) || (b > 0 && doc[b-1] != '\n') {
			t.Fatalf("boundary %d of %q is not at a line start", b, doc)
		}
		step = max(1, min(step, 50))
		var s streamingMarkdown
		var settled []string
		for i := 0; i <= len(doc); i += step {
			lines := s.Lines(md, doc[:i], 30)
			// What has settled stays on screen as it was: each frame
			// starts with the stable lines of the one before.
			if len(lines) < len(settled) || !slices.Equal(lines[:len(settled)], settled) {
				t.Fatalf("frame at byte %d of %q rewrote settled lines:\nbefore %q\nnow    %q", i, doc, settled, lines)
			}
			settled = slices.Clone(s.stable)
		}
		for _, b := range codeBlocks(doc) {
			if !strings.Contains(doc, strings.TrimRight(b, "\n")) {
				t.Fatalf("code block %q is not in %q", b, doc)
			}
		}
	})
}

// A paragraph wrapped over several lines keeps its colour on every line,
// in both themes: each line opens with its style and closes it, so that a
// reset at a line's end (the layout's, beside a panel) loses nothing.
func TestWrappedLinesKeepTheirStyle(t *testing.T) {
	src := "The quick brown fox jumps over the lazy dog and keeps running far away, " +
		"**bold words here** and more plain text after it, and then some more words to wrap."
	for _, dark := range []bool{false, true} {
		md := newMarkdownRenderer(termenv.ANSI256, dark)
		lines := strings.Split(md.Render(src, 30), "\n")
		if len(lines) < 4 {
			t.Fatalf("dark %v: %d lines, want a wrapped paragraph", dark, len(lines))
		}
		for i, line := range lines {
			if xansi.Strip(line) == "" {
				continue
			}
			if st := styleAtFirstText(line); !strings.Contains(st, "38;5;") {
				t.Errorf("dark %v: line %d %q starts its text with style %q, no colour", dark, i, line, st)
			}
			if st := styleAtEnd(line); st != "" {
				t.Errorf("dark %v: line %d %q leaves style %q open", dark, i, line, st)
			}
		}
	}
}

// styleAtFirstText is the SGR state, read from this line alone, where its
// first visible character is drawn.
func styleAtFirstText(line string) string {
	state := ""
	for line != "" {
		if loc := sgrSeq.FindStringIndex(line); loc != nil && loc[0] == 0 {
			state = applySGR(state, line[:loc[1]])
			line = line[loc[1]:]
			continue
		}
		return state
	}
	return state
}

func styleAtEnd(line string) string {
	state := ""
	for _, seq := range sgrSeq.FindAllString(line, -1) {
		state = applySGR(state, seq)
	}
	return state
}

func applySGR(state, seq string) string {
	if p := seq[2 : len(seq)-1]; p == "" || p == "0" {
		return ""
	}
	return state + seq
}

// Code block labels follow codeBlocks' count, and numbering a growing reply
// changes nothing before its last line (the streaming renderer's contract).
func TestNumberCodeBlocks(t *testing.T) {
	src := "Try:\n```sh\nls -l\n```\n\nor\n\n~~~\npwd\n```not a close\n~~~\n\n    ```\n    indented: not a fence\n\n- item\n\n  ```go\n  x := 1\n  ```\n"
	got := numberCodeBlocks(src)
	for n := 1; n <= len(codeBlocks(src)); n++ {
		if want := fmt.Sprintf("*code %d · /copy %d*\n", n, n); !strings.Contains(got, want) {
			t.Errorf("no label %q in\n%s", want, got)
		}
	}
	if len(codeBlocks(src)) != 3 || strings.Contains(got, "code 4") {
		t.Errorf("%d blocks, labelled:\n%s", len(codeBlocks(src)), got)
	}
	if !strings.Contains(got, "Try:\n\n*code 1") || !strings.Contains(got, "  *code 3 · /copy 3*\n  ```go") {
		t.Errorf("a label does not stand on its own line, at its fence's indent:\n%s", got)
	}
	for i := range len(src) {
		prefix := src[:i]
		lastLine := strings.LastIndexByte(prefix, '\n') + 1
		np, nw := numberCodeBlocks(prefix), got
		stable := numberCodeBlocks(prefix[:lastLine])
		if !strings.HasPrefix(np, stable) || !strings.HasPrefix(nw, stable) {
			t.Fatalf("prefix %q: numbered %q does not extend %q", prefix, np, stable)
		}
	}
	if numberCodeBlocks("no code here") != "no code here" {
		t.Error("text without fences changed")
	}
}
