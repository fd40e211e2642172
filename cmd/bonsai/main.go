// Command bonsai runs 1-bit Bonsai (and other GGUF) language models locally:
// a chat TUI by default, and subcommands for scripting, inspection and
// benchmarking.
package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/bonsai-chat/bonsai/tui"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so adding one never touches this file.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// errUsage marks a bad command line; main prints it without a stack of context.
var errUsage = errors.New("usage")

// defaultCommand runs when the first argument is not a subcommand (the chat).
// The TUI's file sets it; until then bonsai prints help.
var defaultCommand func(args []string, stdout, stderr io.Writer) error

func main() {
	os.Exit(mainStatus())
}

// mainStatus runs the command line with GPU drivers' stderr kept in the log
// for the commands that may start one, restoring fd 2 before main exits.
func mainStatus() int {
	stderr := os.Stderr
	if len(os.Args) > 1 && startsEngine[os.Args[1]] {
		if terminal, restore, err := driverStderrToLog(); err == nil {
			stderr = terminal
			defer restore()
		}
	}
	return runMain(os.Args[1:], os.Stdout, stderr)
}

// startsEngine names the subcommands that may load a model on the GPU and
// so start a driver that writes to stderr; the chat keeps the whole of
// stderr in the log itself while its screen is up.
var startsEngine = map[string]bool{"gpu": true, "run": true, "bench": true, "bench-spec": true, "perplexity": true, "serve": true}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "--help":
			if len(args) > 1 && args[0] == "help" {
				return helpFor(args[1], stdout, stderr)
			}
			usage(stdout)
			return 0
		case "version", "-version", "--version":
			fmt.Fprintln(stdout, versionString())
			return 0
		}
		if c, ok := commands[args[0]]; ok {
			return report(c.run(args[1:], stdout, helpOutput(args[1:], stdout, stderr)), stderr)
		}
		if err := misspelled(args[0]); err != nil {
			return report(err, stderr)
		}
	}
	if defaultCommand == nil {
		usage(stderr)
		return 2
	}
	return report(defaultCommand(args, stdout, helpOutput(args, stdout, stderr)), stderr)
}

// helpOutput is where a command writes its usage: stdout when the user
// asked for it (-h), as `bonsai help` does; stderr when it comes with an
// error.
func helpOutput(args []string, stdout, stderr io.Writer) io.Writer {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return stdout
		case "--":
			return stderr
		}
	}
	return stderr
}

// versionString is the module version and VCS revision the binary was built
// from, as the Go toolchain recorded them.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "bonsai (unknown version)"
	}
	return versionOf(bi)
}

// versionOf names the build: its module version, the commit (and whether
// the tree had changes) that go build records, and the Go version. A build
// without a commit (go run, -buildvcs=false, a git worktree) says so, so
// that "(devel)" alone is never all a bug report gets.
func versionOf(bi *debug.BuildInfo) string {
	var rev, dirty, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	out := "bonsai " + cmp.Or(bi.Main.Version, "(devel)")
	if rev == "" {
		return out + " " + bi.GoVersion + " (no commit recorded: 'go run' and -buildvcs=false builds carry none; 'go build' in a git clone records it)"
	}
	out += " (commit " + rev + dirty
	if when != "" {
		out += ", " + when
	}
	return out + ") " + bi.GoVersion
}

// helpFor is `bonsai help COMMAND`: the command's own usage, as
// `bonsai COMMAND -h` prints it.
func helpFor(name string, stdout, stderr io.Writer) int {
	c, ok := commands[name]
	if !ok {
		if err := misspelled(name); err != nil {
			return report(err, stderr)
		}
		return report(fmt.Errorf("%w: no command %q (see 'bonsai help')", errUsage, name), stderr)
	}
	return report(c.run([]string{"-h"}, stdout, stdout), stderr)
}

// misspelled is a usage error for a word that is not a command but is near
// one (`bonsai runn`), nil for anything else: the chat takes the rest.
func misspelled(word string) error {
	if strings.HasPrefix(word, "-") {
		return nil
	}
	near := nearest(word, slices.Collect(maps.Keys(commands)))
	if near == "" {
		return nil
	}
	return fmt.Errorf("%w: unknown command %q: did you mean 'bonsai %s'? ('bonsai help' lists the commands)", errUsage, word, near)
}

func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	// Errors quote what servers and files said: control characters are
	// made visible, as in a reply.
	fmt.Fprintln(stderr, "bonsai:", tui.Printable(err.Error()))
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "bonsai: run 1-bit Bonsai language models locally")
	fmt.Fprintln(w, "\nusage: bonsai [chat flags]        open the chat")
	fmt.Fprintln(w, "       bonsai COMMAND [flags] ...")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'bonsai COMMAND -h' for a command's flags, 'bonsai --version' for the version.")
}
