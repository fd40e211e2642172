package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// stdin is where `bonsai run` reads a piped prompt; tests that run commands
// in-process point it at /dev/null.
var stdin = os.Stdin

// maxPipedPrompt bounds what `bonsai run` reads from stdin: far more than
// any context holds, little enough not to exhaust memory on a runaway pipe.
const maxPipedPrompt = 64 << 20

// promptHelp is how `bonsai run -h` explains where the prompt comes from.
const promptHelp = `The prompt:
  bonsai run PROMPT              PROMPT is the message
  echo PROMPT | bonsai run       no PROMPT argument: stdin is the message
  bonsai run -                   stdin is the message (type it, end with Ctrl+D)
  cat FILE | bonsai run PROMPT   the piped text, a blank line, then PROMPT
                                 (the instruction last, nearest the reply)
stdin is read only when it is not a terminal (or for "-"); use </dev/null to
keep a script's stdin from being read. Flags may come before or after the
prompt; "--" ends them ("bonsai run -- --literal").`

// runPrompt is the message `bonsai run` sends, from its positional
// arguments and stdin (see promptHelp).
func runPrompt(pos []string, in *os.File) (string, error) {
	if len(pos) > 1 {
		return "", fmt.Errorf("%w: run takes one PROMPT argument (quote it), got %d", errUsage, len(pos))
	}
	explicit := len(pos) == 1 && pos[0] == "-"
	if len(pos) == 1 && !explicit && (in == nil || isTerminal(in)) {
		return pos[0], nil
	}
	if !explicit && (in == nil || isTerminal(in)) {
		return "", fmt.Errorf("%w: run needs a PROMPT argument, or a prompt piped on stdin", errUsage)
	}
	piped, err := readPiped(in)
	if err != nil {
		return "", err
	}
	switch {
	case explicit || len(pos) == 0:
		if strings.TrimSpace(piped) == "" {
			return "", fmt.Errorf("%w: no prompt: stdin was empty", errUsage)
		}
		return piped, nil
	case strings.TrimSpace(piped) == "":
		return pos[0], nil // nothing piped (</dev/null, an empty file)
	default:
		return strings.TrimRight(piped, "\n") + "\n\n" + pos[0], nil
	}
}

func readPiped(in io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(in, maxPipedPrompt+1))
	if err != nil {
		return "", fmt.Errorf("read the prompt from stdin: %w", err)
	}
	if len(data) > maxPipedPrompt {
		return "", fmt.Errorf("the prompt on stdin is longer than %d MiB", maxPipedPrompt>>20)
	}
	return string(data), nil
}
