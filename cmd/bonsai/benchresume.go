package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
)

func init() {
	register(command{
		name:    "bench-resume",
		summary: "time to the first token of the next reply in an open chat, and after `bonsai -c` resumes it",
		run:     runBenchResume,
	})
}

// runBenchResume measures what issue 32's resume asks for: a chat of
// about -tokens tokens is read (the time `bonsai -c` took before saved
// states), the next message is answered in the open chat, the chat is
// closed (its state saved) and a new engine answers the same message
// after resuming it. Each measurement is repeated -r times (the open chat
// goes back to before the message, each resume starts from the state as
// saved) and the median shown. Greedy; the states live in a temporary
// directory.
func runBenchResume(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-resume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model (default: the embedded bonsai-tiny)")
	threads := fs.Int("threads", 0, "CPU threads (0: one per core)")
	backend := fs.String("backend", "cpu", "cpu, gpu or auto")
	tokens := fs.Int("tokens", 4000, "tokens of the chat before the next message")
	ctx := fs.Int("ctx", 0, "context size (0: the chat's default, at least -tokens + 256)")
	reps := fs.Int("r", 3, "repetitions of each measurement")
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: bench-resume: unexpected argument %q", errUsage, pos[0])
	}
	if *tokens < 16 || *reps < 1 {
		return fmt.Errorf("%w: -tokens must be at least 16 and -r positive", errUsage)
	}
	if *ctx == 0 {
		*ctx = max(4096, *tokens+256)
	}
	f, err := openModel(*model)
	if err != nil {
		return err
	}
	defer f.Close()
	dir, err := os.MkdirTemp("", "bonsai-bench-resume-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const session = 1
	state := engine.StatePath(dir, session)
	open := func() (*engine.Engine, error) {
		e := engine.New(engine.Options{File: f, Backend: *backend, Threads: *threads, Context: *ctx, StateDir: dir, StateFiles: 1})
		return e, waitLoaded(e)
	}

	a, err := open()
	if err != nil {
		return err
	}
	defer a.Close()
	history, err := chatOf(a, *tokens)
	if err != nil {
		return err
	}
	first, err := timeReply(a, history, session, 16)
	if err != nil {
		return err
	}
	msg := chat.Message{Role: chat.RoleUser, Content: "Thank you. Now say in one sentence what all of this was about."}
	next := append(append(history, chat.Message{Role: chat.RoleAssistant, Content: first.text}), msg)
	var opened, resumed []timedReply
	for range *reps {
		r, err := timeReply(a, next, session, 1)
		if err != nil {
			return err
		}
		opened = append(opened, r)
		// Back to where the chat stood before the message: the history
		// and the first reply, as the cache holds them when the chat is
		// closed.
		if _, err := timeReply(a, history, session, 16); err != nil {
			return err
		}
	}
	closing := time.Now()
	a.Close()
	saved := time.Since(closing)
	pristine, err := os.ReadFile(state)
	if err != nil {
		return fmt.Errorf("closing the chat saved no state: %w", err)
	}
	for range *reps {
		if err := os.WriteFile(state, pristine, 0o600); err != nil {
			return err
		}
		b, err := open()
		if err != nil {
			return err
		}
		r, err := timeReply(b, next, session, 1)
		b.Close()
		if err != nil {
			return err
		}
		resumed = append(resumed, r)
	}
	o, res := medianReply(opened), medianReply(resumed)
	fmt.Fprintf(stdout, "chat of %d tokens, next message %d tokens (%s, %d threads, %s)\n", first.prompt, o.prefill, *backend, *threads, f.Path)
	fmt.Fprintf(stdout, "  reading the chat (-c before saved states): %8.2f s  (%d tokens prefilled)\n", first.ttft.Seconds(), first.prefill)
	fmt.Fprintf(stdout, "  next reply in the open chat, first token:  %8.2f s  (%d tokens prefilled)  runs %s\n", o.ttft.Seconds(), o.prefill, secs(opened))
	fmt.Fprintf(stdout, "  next reply after -c, first token:          %8.2f s  (%d tokens prefilled)  runs %s: %.2f× the open chat's\n",
		res.ttft.Seconds(), res.prefill, secs(resumed), res.ttft.Seconds()/o.ttft.Seconds())
	fmt.Fprintf(stdout, "  state saved at close: %.1f MB in %.2f s\n", float64(len(pristine))/1e6, saved.Seconds())
	for _, n := range resumed[0].notices {
		fmt.Fprintf(stdout, "  engine: %s\n", n)
	}
	return nil
}

// medianReply is the run of median first-token time.
func medianReply(runs []timedReply) timedReply {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b timedReply) int { return cmp.Compare(a.ttft, b.ttft) })
	return s[len(s)/2]
}

func secs(runs []timedReply) string {
	var out []string
	for _, r := range runs {
		out = append(out, fmt.Sprintf("%.2f", r.ttft.Seconds()))
	}
	return strings.Join(out, " ")
}

// chatOf is a conversation of turns of plain prose that e's template makes
// about n tokens of, ending with a user message.
func chatOf(e *engine.Engine, n int) ([]chat.Message, error) {
	words := strings.Fields("the a river stone light window market garden letter morning quiet winter road " +
		"music bread language story mountain harbour lamp clock table friend city forest paper evening " +
		"walks finds keeps remembers carries builds opens follows writes reads slowly brightly again " +
		"under over beside through before after because while although and but so")
	rng := rand.New(rand.NewPCG(1, 2))
	sentence := func() string {
		w := make([]string, 8+rng.IntN(10))
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.ToUpper(w[0][:1]) + strings.Join(w, " ")[1:] + ". "
	}
	var msgs []chat.Message
	for {
		role := chat.RoleUser
		if len(msgs)%2 == 1 {
			role = chat.RoleAssistant
		}
		var b strings.Builder
		for range 10 {
			b.WriteString(sentence())
		}
		msgs = append(msgs, chat.Message{Role: role, Content: strings.TrimSpace(b.String())})
		if role != chat.RoleUser {
			continue
		}
		got, err := e.CountTokens(msgs, false)
		if err != nil {
			return nil, err
		}
		if got >= n {
			return msgs, nil
		}
	}
}

// timedReply is one reply's first-token time and what it read.
type timedReply struct {
	ttft    time.Duration
	prefill int
	prompt  int
	decoded int
	text    string
	notices []string
}

// timeReply asks e for a greedy reply of at most n tokens to msgs in
// session and times its first token.
func timeReply(e *engine.Engine, msgs []chat.Message, session int64, n int) (timedReply, error) {
	e.Generate(engine.GenerateRequest{Messages: msgs, MaxTokens: n, Sampling: &engine.Sampling{}, Session: session})
	var r timedReply
	for ev := range e.Events() {
		switch ev := ev.(type) {
		case engine.Token:
			r.text += ev.Text
		case engine.Notice:
			r.notices = append(r.notices, ev.Text)
		case engine.Error:
			return r, ev.Err
		case engine.Done:
			r.ttft, r.prefill, r.decoded = ev.Stats.TTFT, ev.Stats.PrefillTokens, ev.Stats.DecodeTokens
			r.prompt = ev.Stats.ContextUsed - ev.Stats.DecodeTokens + 1
			return r, nil
		}
	}
	return r, errors.New("the engine stopped")
}
