// Command bonsai runs 1-bit Bonsai (and other GGUF) language models locally:
// a chat TUI by default, and subcommands for scripting, inspection and
// benchmarking.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
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
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "--help":
			usage(stdout)
			return 0
		}
		if c, ok := commands[args[0]]; ok {
			return report(c.run(args[1:], stdout, stderr), stderr)
		}
	}
	if defaultCommand == nil {
		usage(stderr)
		return 2
	}
	return report(defaultCommand(args, stdout, stderr), stderr)
}

func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "bonsai:", err)
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
	fmt.Fprintln(w, "\nRun 'bonsai COMMAND -h' for a command's flags.")
}
