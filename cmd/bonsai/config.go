package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/session"
)

func init() {
	register(command{
		name:    "config",
		summary: "print the effective configuration and where each value came from",
		run:     runConfig,
	})
}

func runConfig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flags := config.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai config [chat flags]")
		fmt.Fprintln(stderr, "Prints every setting after defaults, the config file, BONSAI_* variables and the flags given.")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: config: unexpected argument %q", errUsage, pos[0])
	}
	cfg, err := loadConfig(flags, stderr)
	if err != nil {
		return err
	}
	if _, err := keyMap(cfg); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# config file: %s\n", cfg.Path)
	if p, err := session.DefaultPath(); err == nil {
		fmt.Fprintf(stdout, "# conversations: %s\n", p)
	}
	if p, err := config.StatePath(); err == nil {
		fmt.Fprintf(stdout, "# UI state: %s\n", p)
	}
	if p, err := config.LogPath(); err == nil {
		fmt.Fprintf(stdout, "# log: %s\n", p)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, e := range cfg.Entries() {
		src := e.Source.String()
		if e.Source.Origin == config.FromDefault && strings.HasPrefix(e.Key, "sampling.") && e.Key != "sampling.seed" {
			// The chat samples with the model's recommendation for keys
			// the user leaves unset; these are Bonsai's.
			src = "default: the model's recommendation (Bonsai's shown)"
		}
		fmt.Fprintf(tw, "%s = %s\t# %s\n", e.Key, e.Value, src)
	}
	return tw.Flush()
}

// loadConfig is the configuration every command reads: defaults, the file,
// BONSAI_* variables and the flags given (from config.RegisterFlags or
// config.RegisterSettings), the later winning. A bad flag value is a
// usage error. Its warnings (an unknown key
// in the file) go to stderr; the chat shows them as notices instead.
func loadConfig(flags *config.Flags, stderr io.Writer) (*config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{Flags: flags})
	if errors.Is(err, config.ErrFlag) {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err != nil {
		return nil, err
	}
	if stderr != nil {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
	}
	return cfg, nil
}
