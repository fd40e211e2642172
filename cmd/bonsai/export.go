package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/bonsai-chat/bonsai/session"
)

func init() {
	register(command{
		name:    "export",
		summary: "write a saved conversation as Markdown or JSON",
		run:     runExport,
	})
}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "", "md or json (default: from -o's extension, else md)")
	out := fs.String("o", "", "write to `file` (atomically) instead of standard output")
	dbPath := fs.String("db", "", "conversation database `file` (default: $XDG_DATA_HOME/bonsai/bonsai.db)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai export ID|last [--format md|json] [-o FILE]")
		fs.PrintDefaults()
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(rest) != 1 {
		return fmt.Errorf("%w: export needs one session ID (or 'last'); see 'bonsai sessions'", errUsage)
	}
	f, err := exportFormat(*format, *out)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	store, err := readSessions(*dbPath)
	if errors.Is(err, os.ErrNotExist) {
		return errors.New("no saved conversations yet: there is nothing to export")
	}
	if err != nil {
		return err
	}
	defer store.Close()
	ctx := context.Background()
	var s *session.Session
	if rest[0] == "last" {
		s, err = store.Last(ctx)
	} else {
		id, perr := parseSessionID(rest[0])
		if perr != nil {
			return perr
		}
		s, err = store.Load(ctx, id)
	}
	if err != nil {
		return err
	}
	if *out == "" {
		w, done := terminalSafe(stdout)
		if err := session.Write(w, s, f); err != nil {
			return err
		}
		return done()
	}
	return session.Export(s, f, *out)
}

// exportFormat picks the format from the flag, else from the output file's
// extension (.md or .json; another is refused), else Markdown.
func exportFormat(flagValue, out string) (session.Format, error) {
	if flagValue != "" {
		return session.ParseFormat(flagValue)
	}
	if out != "" {
		return session.FormatOf(out)
	}
	return session.Markdown, nil
}
