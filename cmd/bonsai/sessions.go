package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/tui"
)

func init() {
	register(command{
		name:    "sessions",
		summary: "list, search, rename or delete saved conversations",
		run:     runSessions,
	})
}

func runSessions(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	search := fs.String("search", "", "full-text search of every message for these `words`")
	asJSON := fs.Bool("json", false, "print JSON")
	dbPath := fs.String("db", "", "conversation database `file` (default: $XDG_DATA_HOME/bonsai/bonsai.db)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai sessions [list] [--json]")
		fmt.Fprintln(stderr, "       bonsai sessions search WORDS   (or --search WORDS)")
		fmt.Fprintln(stderr, "       bonsai sessions rename ID TITLE")
		fmt.Fprintln(stderr, "       bonsai sessions delete ID...")
		fs.PrintDefaults()
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	// "list" and "search WORDS" are the flagless spellings of the two
	// listings.
	if len(rest) > 0 {
		switch rest[0] {
		case "list", "ls":
			if len(rest) > 1 {
				return fmt.Errorf("%w: sessions list takes no arguments", errUsage)
			}
			rest = nil
		case "search":
			if len(rest) < 2 {
				return fmt.Errorf("%w: sessions search WORDS", errUsage)
			}
			*search, rest = strings.Join(rest[1:], " "), nil
		}
	}
	if len(rest) > 0 {
		return changeSessions(*dbPath, rest)
	}
	store, err := readSessions(*dbPath)
	if errors.Is(err, os.ErrNotExist) {
		// Listing must not create a database as a side effect.
		if *asJSON {
			fmt.Fprintln(stdout, "[]")
		} else {
			fmt.Fprintln(stdout, "no saved conversations yet")
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	ctx := context.Background()

	if *search != "" {
		hits, err := store.Search(ctx, *search, session.SearchOptions{})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, hitsJSON(hits))
		}
		if len(hits) == 0 {
			fmt.Fprintf(stdout, "no messages match %q\n", *search)
			return nil
		}
		for _, h := range hits {
			fmt.Fprintf(stdout, "%d  %s  %s\n    %s: %s\n", h.SessionID, h.Created.Format("2006-01-02 15:04"),
				titleOrUntitled(h.Title), h.Role, oneLine(strings.ReplaceAll(h.Snippet, "**", "")))
		}
		return nil
	}

	list, err := store.List(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, sessionsJSON(list))
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no saved conversations yet")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tMSGS\tTITLE")
	for _, s := range list {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", s.ID, s.Updated.Format("2006-01-02 15:04"), s.Messages, titleOrUntitled(s.Title))
	}
	return tw.Flush()
}

// changeSessions renames or deletes sessions.
func changeSessions(dbPath string, rest []string) error {
	if !slices.Contains([]string{"rename", "delete", "rm"}, rest[0]) {
		return fmt.Errorf("%w: sessions: unknown action %q (list, search, rename, delete)", errUsage, rest[0])
	}
	store, err := openForWriting(dbPath)
	if err != nil {
		return err
	}
	defer store.Close()
	ctx := context.Background()
	switch rest[0] {
	case "rename":
		if len(rest) != 3 {
			return fmt.Errorf("%w: sessions rename ID TITLE", errUsage)
		}
		id, err := parseSessionID(rest[1])
		if err != nil {
			return err
		}
		return store.Rename(ctx, id, rest[2])
	default: // delete, rm
		if len(rest) < 2 {
			return fmt.Errorf("%w: sessions delete ID [ID ...]", errUsage)
		}
		for _, a := range rest[1:] {
			id, err := parseSessionID(a)
			if err != nil {
				return err
			}
			if err := store.Delete(ctx, id); err != nil {
				return err
			}
			if path, err := sessionDBPath(dbPath); err == nil {
				engine.RemoveSavedState(chatStateDir(path), id)
			}
		}
	}
	return nil
}

// readSessions opens the database for reading only (the --db file, else
// the XDG default), so that listing, searching and exporting need no write
// access; a missing database is an error wrapping os.ErrNotExist.
func readSessions(dbPath string) (*session.Store, error) {
	if dbPath == "" {
		dbPath = session.DataPath()
	}
	return session.OpenReadOnly(dbPath, session.Options{})
}

// sessionDBPath resolves the database path: the --db flag, else the XDG
// default.
func sessionDBPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return session.DefaultPath()
}

func parseSessionID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: %q is not a session id (a positive number; see 'bonsai sessions')", errUsage, s)
	}
	return id, nil
}

// titleOrUntitled and oneLine clean stored text for a terminal: titles and
// messages can hold anything a model or a user wrote, escape sequences
// and NULs included.
func titleOrUntitled(t string) string {
	if t == "" {
		return "(untitled)"
	}
	return oneLine(t)
}

func oneLine(s string) string { return tui.Printable(strings.Join(strings.Fields(s), " ")) }

func printJSON(w io.Writer, v any) error {
	w, done := terminalSafe(w)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return done()
}

// isTerminalWriter reports whether w is a terminal; tests replace it.
var isTerminalWriter = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// terminalSafe returns w itself when it is not a terminal (a file or a
// pipe gets the text exactly), else a buffer whose content done writes to w
// with control characters made visible (JSON leaves C1 controls and DEL
// raw, and Markdown everything).
func terminalSafe(w io.Writer) (io.Writer, func() error) {
	if !isTerminalWriter(w) {
		return w, func() error { return nil }
	}
	var buf bytes.Buffer
	return &buf, func() error {
		_, err := io.WriteString(w, tui.Printable(buf.String()))
		return err
	}
}

type sessionJSON struct {
	ID       int64     `json:"id"`
	Title    string    `json:"title"`
	Messages int       `json:"messages"`
	Model    string    `json:"model,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

func sessionsJSON(list []session.Info) []sessionJSON {
	out := []sessionJSON{}
	for _, s := range list {
		out = append(out, sessionJSON{ID: s.ID, Title: s.Title, Messages: s.Messages, Model: s.Model,
			Created: s.Created.UTC(), Updated: s.Updated.UTC()})
	}
	return out
}

type hitJSON struct {
	Session int64     `json:"session"`
	Title   string    `json:"title"`
	Message int64     `json:"message"`
	Role    string    `json:"role"`
	Snippet string    `json:"snippet"`
	Created time.Time `json:"created"`
}

func hitsJSON(hits []session.Hit) []hitJSON {
	out := []hitJSON{}
	for _, h := range hits {
		out = append(out, hitJSON{Session: h.SessionID, Title: h.Title, Message: h.MessageID, Role: h.Role,
			Snippet: h.Snippet, Created: h.Created.UTC()})
	}
	return out
}
