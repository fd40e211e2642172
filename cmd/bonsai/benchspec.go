package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

func init() {
	register(command{
		name:    "bench-spec",
		summary: "measure decoding with and without speculative decoding on quoting and free tasks",
		run:     runBenchSpec,
	})
}

// specPassage is what the quoting tasks quote: scripture, the default
// model's own register.
const specPassage = "And God said, Let there be light: and there was light. And God saw the light, that it was good: " +
	"and God divided the light from the darkness. And God called the light Day, and the darkness he called Night. " +
	"And the evening and the morning were the first day."

// specTask is one benchmark prompt; quote says the reply is expected to
// quote the prompt (the ≥ 1.5× tasks), else it is free generation (≥ 0.95×).
type specTask struct {
	name   string
	prompt string
	quote  bool
}

var specTasks = []specTask{
	{"repeat", "Repeat this passage word for word:\n\n" + specPassage, true},
	{"edit", "Copy this passage, changing \"light\" to \"sun\":\n\n" + specPassage, true},
	{"summarise", "Summarise this passage, quoting its key sentence:\n\n" + specPassage, true},
	{"free", "Tell me of the sea and the ships that sail upon it.", false},
	{"free2", "Who was David, and what did he do?", false},
}

// specRun is one reply's measurements.
type specRun struct {
	Task     string  `json:"task"`
	Mode     string  `json:"mode"`
	Tokens   int     `json:"tokens"`
	TPS      float64 `json:"decode_tps"`
	Drafted  int     `json:"drafted"`
	Accepted int     `json:"accepted"`
	Text     string  `json:"-"`
}

func runBenchSpec(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-spec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model (default: the embedded bonsai-tiny)")
	draft := fs.String("draft", "", "also measure this draft model")
	threads := fs.Int("threads", 0, "CPU threads (0: one per core)")
	backend := fs.String("backend", "cpu", "cpu, gpu or auto")
	reps := fs.Int("r", 5, "repetitions of each task and mode, alternated")
	maxTokens := fs.Int("n", 128, "tokens per reply")
	maxDraft := fs.Int("max-draft", 0, "most tokens drafted per pass (0: the default)")
	tasks := fs.String("tasks", "", "comma-separated task names (default: all)")
	format := fs.String("format", "text", "text or json")
	temp := fs.Float64("temp", 0, "temperature (0: greedy); above 0 the model's other sampling settings and a fixed seed")
	replay := fs.Bool("replay", true, "also measure replayed replies: drafts that are the reply itself (every one, and four in five), what a verbatim quote gets")
	aa := fs.Bool("aa", false, "A/A check: a second plain engine in place of prompt lookup, so the ratios show the machine's noise")
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: bench-spec: unexpected argument %q", errUsage, pos[0])
	}
	if *reps < 1 || *maxTokens < 1 {
		return fmt.Errorf("%w: -r and -n must be positive", errUsage)
	}
	f, err := openModel(*model)
	if err != nil {
		return err
	}
	defer f.Close()
	sampling := engine.Sampling{}
	if *temp > 0 {
		sampling = engine.DefaultSampling(infer.DetectVariant(f))
		sampling.Temperature, sampling.Seed = float32(*temp), 1
	}
	modes := []spec.Options{{Mode: spec.Off}, {Mode: spec.NGram, MaxDraft: *maxDraft}}
	labels := []string{string(spec.Off), string(spec.NGram)}
	if *aa {
		modes[1], labels[1] = spec.Options{Mode: spec.Off}, "off-b"
	}
	if *draft != "" {
		o, err := resolveSpec("draft", *draft)
		if err != nil {
			return err
		}
		o.MaxDraft = *maxDraft
		modes = append(modes, o)
		labels = append(labels, string(o.Mode))
	}
	engines := make([]*engine.Engine, len(modes))
	for i, o := range modes {
		e := engine.New(engine.Options{File: f, Backend: *backend, Threads: *threads, Spec: o, Sampling: &sampling})
		defer e.Close()
		if err := waitLoaded(e); err != nil {
			return err
		}
		engines[i] = e
	}
	var runs []specRun
	for _, t := range specTasks {
		if *tasks != "" && !slices.Contains(strings.Split(*tasks, ","), t.name) {
			continue
		}
		for rep := range *reps {
			// Alternated, so that a busy machine slows every mode alike,
			// and in reverse order every other repetition, so that going
			// first (or second) favours none.
			for j := range engines {
				i := j
				if rep%2 == 1 {
					i = len(engines) - 1 - j
				}
				r, err := benchReply(engines[i], t, *maxTokens)
				if err != nil {
					return err
				}
				r.Mode = labels[i]
				runs = append(runs, r)
			}
		}
	}
	if *format == "json" {
		return json.NewEncoder(stdout).Encode(runs)
	}
	if err := printSpecBench(stdout, runs, labels); err != nil {
		return err
	}
	if !*replay {
		return nil
	}
	return replayBench(stdout, f, *backend, *threads, *reps, *maxTokens, *maxDraft)
}

func waitLoaded(e *engine.Engine) error {
	for ev := range e.Events() {
		switch ev := ev.(type) {
		case engine.Loaded:
			return nil
		case engine.Error:
			if ev.Fatal || ev.NoModel {
				return ev.Err
			}
		}
	}
	return errors.New("the engine stopped while loading")
}

// benchReply answers the task afresh (the cache reset) and measures it.
func benchReply(e *engine.Engine, t specTask, n int) (specRun, error) {
	e.Reset()
	e.Generate(engine.GenerateRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: t.prompt}}, MaxTokens: n})
	r := specRun{Task: t.name}
	for ev := range e.Events() {
		switch ev := ev.(type) {
		case engine.Token:
			r.Text += ev.Text
		case engine.Error:
			return r, ev.Err
		case engine.Done:
			r.Tokens, r.TPS = ev.Stats.DecodeTokens, ev.Stats.DecodeTPS
			r.Drafted, r.Accepted = ev.Stats.Drafted, ev.Stats.Accepted
			return r, nil
		}
	}
	return r, errors.New("the engine stopped during a reply")
}

// printSpecBench writes, per task and mode, the median decode speed, its
// ratio to plain decoding (the median of the per-repetition ratios, each
// against the plain run beside it) and the acceptance. modes[0] is the
// plain engine.
func printSpecBench(w io.Writer, runs []specRun, modes []string) error {
	fmt.Fprintf(w, "%-10s %-6s %7s %10s %8s %9s %8s\n", "task", "mode", "tokens", "tok/s", "ratio", "accepted", "rate")
	for _, t := range specTasks {
		byMode := map[string][]specRun{}
		for _, r := range runs {
			if r.Task == t.name {
				byMode[r.Mode] = append(byMode[r.Mode], r)
			}
		}
		plain := byMode[modes[0]]
		if len(plain) == 0 {
			continue
		}
		for _, mode := range modes {
			rs := byMode[mode]
			var tps, ratios []float64
			drafted, accepted, tokens := 0, 0, 0
			for i, r := range rs {
				tps = append(tps, r.TPS)
				if i < len(plain) && plain[i].TPS > 0 {
					ratios = append(ratios, r.TPS/plain[i].TPS)
				}
				drafted += r.Drafted
				accepted += r.Accepted
				tokens = r.Tokens
			}
			rate := 0.0
			if drafted > 0 {
				rate = float64(accepted) / float64(drafted)
			}
			fmt.Fprintf(w, "%-10s %-6s %7d %10.1f %7.2fx %4d/%-4d %7.0f%%\n", t.name, mode, tokens, median(tps), median(ratios), accepted, drafted, 100*rate)
		}
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// replayDrafter drafts a known reply: each token right, or every wrong-th
// one off by one (wrong 0: none wrong).
type replayDrafter struct {
	prompt int
	reply  []int32
	wrong  int
	buf    []int32
}

func (r *replayDrafter) Draft(ctx []int32, k int) ([]int32, [][]sample.Prob, error) {
	r.buf = r.buf[:0]
	for i := len(ctx) - r.prompt; i >= 0 && i < len(r.reply) && len(r.buf) < k; i++ {
		id := r.reply[i]
		if r.wrong > 0 && i%r.wrong == r.wrong-1 {
			id = (id + 1) % 1000
		}
		r.buf = append(r.buf, id)
	}
	return r.buf, nil, nil
}

// replayBench measures the scheduler's decoding itself on the model: plain greedy
// decoding of n tokens after the first task's prompt (past the end of the
// turn, so that every run decodes n), then the same with drafts that are
// that reply, alternated. It is the speed a reply that quotes its prompt
// verbatim gets from prompt lookup, whatever the model.
func replayBench(w io.Writer, f *gguf.File, backend string, threads, reps, n, maxDraft int) error {
	m, err := infer.Load(f, infer.Options{Backend: backend, Threads: threads})
	if err != nil {
		return err
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		return err
	}
	prompt := chat.FromGGUF(f.KV).Encode([]chat.Message{{Role: chat.RoleUser, Content: specTasks[0].prompt}}, true, false, tok.Encode)
	if tok.AddBOS() && tok.BOS() >= 0 {
		prompt = append([]int32{tok.BOS()}, prompt...)
	}
	n = min(n, m.Context()-len(prompt)-1)
	// The scheduler's one slot, as the chat runs it: each run's prompt is
	// the last one's, so only its last token is read again.
	sched, err := slots.New(slots.Options{Model: m, Slots: 1, Context: m.Context(), Forward: true, MaxDraft: maxDraft})
	if err != nil {
		return err
	}
	defer sched.Close()
	decode := func(d spec.Drafter) ([]int32, float64, spec.Stats, error) {
		st, err := sched.Submit(context.Background(), slots.Request{Prompt: prompt, MaxTokens: n, Drafter: d})
		if err != nil {
			return nil, 0, spec.Stats{}, err
		}
		out, res := st.Collect()
		if res.Err != nil {
			return nil, 0, spec.Stats{}, res.Err
		}
		if len(out) != n {
			return nil, 0, spec.Stats{}, fmt.Errorf("replay: %d tokens decoded, want %d (%s)", len(out), n, res.Reason)
		}
		// The tokens after the first over the time from the first to the
		// last: the decoding, not the prompt's reading.
		return out, float64(n-1) / res.Decode.Seconds(), spec.Stats{Drafted: res.Drafted, Accepted: res.Accepted, Passes: res.Verifies}, nil
	}
	reply, _, _, err := decode(nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nreplay (%d tokens after the %q prompt, greedy, alternated %d times):\n", n, specTasks[0].name, reps)
	fmt.Fprintf(w, "%-22s %10s %8s %9s %8s\n", "drafts", "tok/s", "ratio", "accepted", "rate")
	for _, wrong := range []int{0, 5} {
		var plain, fast, ratios []float64
		var st spec.Stats
		for range reps {
			_, p, _, err := decode(nil)
			if err != nil {
				return err
			}
			got, s, sst, err := decode(&replayDrafter{prompt: len(prompt), reply: reply, wrong: wrong})
			if err != nil {
				return err
			}
			if !slices.Equal(got, reply) {
				return errors.New("replay: the speculative reply differs from plain decoding")
			}
			plain, fast, ratios = append(plain, p), append(fast, s), append(ratios, s/p)
			st.Drafted += sst.Drafted
			st.Accepted += sst.Accepted
		}
		name := "the reply"
		if wrong > 0 {
			name = fmt.Sprintf("the reply, 1 in %d off", wrong)
		}
		fmt.Fprintf(w, "%-22s %10.1f %8s %9s %8s\n", "none (plain)", median(plain), "1.00x", "", "")
		fmt.Fprintf(w, "%-22s %10.1f %7.2fx %4d/%-4d %7.0f%%\n", name, median(fast), median(ratios), st.Accepted, st.Drafted, 100*st.Rate())
	}
	return nil
}
