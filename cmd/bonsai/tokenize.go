package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

func init() {
	register(command{
		name:    "tokenize",
		summary: "print the token ids of a text under a model's tokenizer",
		run:     runTokenize,
	})
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFlags := config.RegisterSettings(fs, "model") // the chat's model unless one is named
	format := fs.String("format", "ids", "ids (space separated), or pieces (id and token text, one per line)")
	special := fs.Bool("special", true, "parse special tokens such as <|im_start|> in the text")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai tokenize --model M [--format ids|pieces] [--special=false] TEXT")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return fmt.Errorf("%w: tokenize takes one TEXT argument (quote it), got %d", errUsage, len(pos))
	}
	if *format != "ids" && *format != "pieces" {
		return fmt.Errorf("%w: --format %q: want ids or pieces", errUsage, *format)
	}
	cfg, err := loadConfig(cfgFlags, stderr)
	if err != nil {
		return err
	}
	f, err := openModel(cfg.Model)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	ids := tok.Encode(pos[0], *special)
	if *format == "pieces" {
		for _, id := range ids {
			if _, err := fmt.Fprintf(stdout, "%d\t%q\n", id, tok.Decode([]int32{id})); err != nil {
				return err
			}
		}
		return nil
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	_, err = fmt.Fprintln(stdout, strings.Join(parts, " "))
	return err
}
