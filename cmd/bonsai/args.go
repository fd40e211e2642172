package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseArgs parses a command's flags wherever they stand among its
// positional arguments (`bonsai run "hi" --ctx 256` is `bonsai run --ctx 256
// "hi"`), up to a "--", after which everything is positional (`bonsai run --
// --not-a-flag`). It returns the positional arguments in order.
//
// -h prints the command's usage. A bad flag prints one line, not the
// usage: the error in the user's spelling of the flag, a near flag it may
// have meant, and where the flags are listed (main prints it).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()

	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				usage()
				return nil, err
			}
			return nil, flagError(fs, args, err)
		}
		rest := fs.Args()
		if endedFlags(fs, args[:len(args)-len(rest)]) {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// endedFlags reports whether fs.Parse stopped on a "--" that ends the
// flags, given the arguments that call consumed. It walks them as the flag
// package does, since a "--" may instead be a flag's value (`--system --`).
func endedFlags(fs *flag.FlagSet, consumed []string) bool {
	for i := 0; i < len(consumed); i++ {
		a := consumed[i]
		if a == "--" {
			return true
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
			i++ // its value
		}
	}
	return false
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagError restates the flag package's error in the user's words: the
// flag as they typed it (--nope, not -nope), a defined flag near it, and
// the command whose -h lists them all.
func flagError(fs *flag.FlagSet, args []string, err error) error {
	msg := err.Error()
	for _, form := range []struct{ prefix, words string }{
		{"flag provided but not defined: -", "unknown flag %s"},
		{"flag needs an argument: -", "flag %s needs a value"},
	} {
		name, ok := strings.CutPrefix(msg, form.prefix)
		if !ok {
			continue
		}
		msg = fmt.Sprintf(form.words, typed(args, name))
		if strings.HasPrefix(form.prefix, "flag provided") {
			if near := nearest(name, flagNames(fs)); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", dashed(near))
			}
		}
		break
	}
	// `invalid value "x" for flag -ctx: …` and `invalid boolean value "x"
	// for -raw: parse error`: the flag as typed, and what a switch takes.
	for _, sep := range []string{" for flag -", " for -"} {
		if i := strings.Index(msg, sep); strings.HasPrefix(msg, "invalid ") && i >= 0 {
			name, detail, _ := strings.Cut(msg[i+len(sep):], ":")
			if strings.HasPrefix(msg, "invalid boolean") {
				detail = " a switch is true or false"
			}
			msg = msg[:i] + " for " + typed(args, name) + ":" + detail
			break
		}
	}
	return fmt.Errorf("%s; '%s -h' lists the flags", msg, commandLine(fs))
}

// typed is how the user spelled the flag name among args: -x or --x.
func typed(args []string, name string) string {
	for _, a := range args {
		a, _, _ = strings.Cut(a, "=")
		if a == "-"+name || a == "--"+name {
			return a
		}
	}
	return dashed(name)
}

// dashed is how the help writes a flag: -c for one letter, --ctx for more.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// commandLine is how the user runs fs's command: "bonsai run", or "bonsai"
// for the chat's flags.
func commandLine(fs *flag.FlagSet) string {
	if fs.Name() == "bonsai" || fs.Name() == "" {
		return "bonsai"
	}
	return "bonsai " + fs.Name()
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// nearest is the candidate closest to word when it is near enough to be a
// slip of the keyboard (at most a third of word's letters off, and at most
// two), else "". A single letter is near every other: it gets none.
func nearest(word string, candidates []string) string {
	if len(word) < 2 {
		return ""
	}
	best, bestD := "", min(2, max(1, len(word)/3))+1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes;
// callers compare short names, so its cost is small.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
