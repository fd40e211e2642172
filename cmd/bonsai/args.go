package main

import (
	"flag"
	"io"
	"strings"
)

// parseArgs parses a command's flags wherever they stand among its
// positional arguments (`bonsai run "hi" --ctx 256` is `bonsai run --ctx 256
// "hi"`), up to a "--", after which everything is positional (`bonsai run --
// --not-a-flag`). It returns the positional arguments in order.
//
// A bad flag is reported once: the flag package would print the error
// before the usage and main prints it again, so here it prints only the
// usage and the caller returns the error for main to print.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fs.SetOutput(out)
		defer fs.SetOutput(io.Discard)
		if usage != nil {
			usage()
		} else {
			fs.PrintDefaults()
		}
	}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()

	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
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
