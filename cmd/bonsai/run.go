package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // registers the "cpu" backend
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

func init() {
	register(command{
		name:    "run",
		summary: "generate a reply to a prompt and stream it to stdout",
		run:     runRun,
	})
}

// runFlags are `bonsai run`'s options.
type runFlags struct {
	model     string
	raw       bool
	think     bool
	format    string
	topLogits int
	maxTokens int
	ctx       int
	threads   int
	backend   string
	profile   bool
	sampling  sample.Params
	stop      map[int32]bool // end-of-turn tokens besides the tokenizer's EOG
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runFlags
	fs.StringVar(&o.model, "model", "", "model: a GGUF file path, a registry name or a file in the models directory (default: the embedded bonsai-tiny)")
	fs.BoolVar(&o.raw, "raw", false, "send the prompt as is, without the chat template")
	fs.BoolVar(&o.think, "think", false, "let the model reason in <think> before answering")
	fs.StringVar(&o.format, "format", "text", "output: text, or jsonl (one JSON object per token, then a summary)")
	fs.IntVar(&o.topLogits, "top-logits", 0, "with --format jsonl, include the K largest logits of each step")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "stop after N generated tokens (0: end of turn or context)")
	fs.IntVar(&o.ctx, "ctx", 0, "context size in tokens (0: 4096, capped by the model)")
	fs.IntVar(&o.threads, "threads", 0, "CPU threads (0: one per core)")
	fs.StringVar(&o.backend, "backend", "auto", "cpu, gpu or auto")
	fs.BoolVar(&o.profile, "profile", false, "print the time per forward-pass phase to stderr at the end")
	temp := fs.Float64("temp", 0, "temperature (0: greedy; default: the model's recommendation)")
	topK := fs.Int("top-k", 0, "keep the K most likely tokens (0: all)")
	topP := fs.Float64("top-p", 0, "nucleus sampling threshold (0 or 1: off)")
	minP := fs.Float64("min-p", 0, "drop tokens below this fraction of the top probability")
	repeat := fs.Float64("repeat-penalty", 1, "llama.cpp's repetition penalty (1: off)")
	seed := fs.Uint64("seed", 0, "random seed (0: from the clock)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai run [--model M] [--raw] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed N]\n"+
			"                  [--max-tokens N] [--ctx N] [--threads N] [--backend cpu|gpu|auto] [--think]\n"+
			"                  [--format text|jsonl] [--top-logits K] PROMPT")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: run takes one PROMPT argument (quote it), got %d", errUsage, fs.NArg())
	}
	if o.format != "text" && o.format != "jsonl" {
		return fmt.Errorf("%w: --format %q: want text or jsonl", errUsage, o.format)
	}
	if o.topLogits < 0 || o.maxTokens < 0 || o.ctx < 0 || o.threads < 0 {
		return fmt.Errorf("%w: --top-logits, --max-tokens, --ctx and --threads must not be negative", errUsage)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	f, err := openModel(o.model)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f.KV)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}

	// Sampling: the model's recommendation (llama.cpp's defaults for other
	// models), then whatever the flags set.
	variant := infer.DetectVariant(f)
	o.sampling = sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
	if variant.Bonsai {
		o.sampling = sample.Params{Temperature: variant.Temperature, TopK: variant.TopK, TopP: variant.TopP, RepeatPenalty: 1, RepeatLastN: 64}
	}
	if set["temp"] {
		o.sampling.Temperature = float32(*temp)
	}
	if set["top-k"] {
		o.sampling.TopK = *topK
	}
	if set["top-p"] {
		o.sampling.TopP = float32(*topP)
	}
	if set["min-p"] {
		o.sampling.MinP = float32(*minP)
	}
	if set["repeat-penalty"] {
		o.sampling.RepeatPenalty = float32(*repeat)
	}
	o.sampling.Seed = *seed
	if !set["seed"] {
		o.sampling.Seed = uint64(time.Now().UnixNano())
	}
	sampler, err := sample.New(o.sampling)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}

	tmpl := chat.FromGGUF(f.KV)
	o.stop = map[int32]bool{}
	for _, id := range tmpl.StopIDs(tok.ID) {
		o.stop[id] = true
	}
	// --raw is the caller's own prompt, markers and all; otherwise the
	// prompt is text inside the template's turn.
	ids := tok.Encode(fs.Arg(0), true)
	if !o.raw {
		ids = tmpl.Encode([]chat.Message{{Role: chat.RoleUser, Content: fs.Arg(0)}}, true, o.think, tok.Encode)
	}
	if tok.AddBOS() && tok.BOS() >= 0 {
		ids = append([]int32{tok.BOS()}, ids...)
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: the prompt encodes to no tokens", errUsage)
	}

	m, err := infer.Load(f, infer.Options{Backend: o.backend, Threads: o.threads, Context: o.ctx, Profile: o.profile})
	if err != nil {
		return err
	}
	defer m.Close()
	var sampling time.Duration
	if err := generate(m, tok, sampler, ids, o, stdout, &sampling); err != nil {
		return err
	}
	if o.profile {
		s := m.Backend().TakeProfile()
		s.Add(profile.Sampling, sampling)
		printProfile(s, stderr)
	}
	return nil
}

// printProfile writes the mean time per token of each phase.
func printProfile(s profile.Sample, w io.Writer) {
	fmt.Fprintf(w, "profile (%s), %d tokens through the model:\n", s.Source, s.Tokens)
	total := s.Total()
	for p := range profile.NumPhases {
		d := s.Phases[p]
		if d == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-12s %10v/token %5.1f%%\n", p, s.PerToken(p), 100*float64(d)/float64(total))
	}
}

// openModel resolves --model (a path, a registry name or a file in the
// models directory, through infer/hub) and maps the file; no name means the
// embedded default model (bonsai-tiny).
func openModel(name string) (*gguf.File, error) {
	if name == "" {
		return defaultmodel.Open()
	}
	path, err := hub.Resolve(name, hub.DefaultDir())
	if err != nil {
		return nil, err
	}
	return gguf.Open(path)
}

// doneLine ends --format jsonl output.
type doneLine struct {
	Done            bool    `json:"done"`
	Reason          string  `json:"reason"`
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	PrefillTPS      float64 `json:"prefill_tps"`
	DecodeTPS       float64 `json:"decode_tps"`
	Backend         string  `json:"backend"`
	// Text is what the stream decoder held back at the end (an incomplete
	// UTF-8 sequence), if anything.
	Text string `json:"text,omitempty"`
}

// generate prefills ids, then samples until the end of the turn, the token
// limit or the end of the context, streaming to out.
func generate(m *infer.Model, tok *tokenizer.Tokenizer, sampler *sample.Sampler, ids []int32, o runFlags, out io.Writer, sampling *time.Duration) error {
	seq := infer.NewSequence(m)
	for _, id := range ids {
		sampler.Accept(id)
	}
	start := time.Now()
	if _, err := seq.Prefill(ids, nil); err != nil {
		return err
	}
	prefill := time.Since(start)

	enc := json.NewEncoder(out)
	dec := tok.NewStreamDecoder()
	var top []sample.Logit
	reason, generated := "length", 0
	decodeStart := time.Now()
	for o.maxTokens == 0 || generated < o.maxTokens {
		logits := m.Logits()
		if o.topLogits > 0 {
			top = sample.Top(logits, o.topLogits, top)
		}
		t0 := time.Now()
		id := sampler.Sample(logits)
		sampler.Accept(id)
		*sampling += time.Since(t0)
		generated++
		if tok.IsEOG(id) || o.stop[id] {
			reason = "stop"
			if o.format == "jsonl" {
				if err := enc.Encode(jsonToken(id, "", top, o.topLogits)); err != nil {
					return err
				}
			}
			break
		}
		text := dec.Next(id)
		if o.format == "jsonl" {
			if err := enc.Encode(jsonToken(id, text, top, o.topLogits)); err != nil {
				return err
			}
		} else if _, err := io.WriteString(out, text); err != nil {
			return err
		}
		if seq.Len() >= m.Context() {
			break // the sampled token has no room: reason stays "length"
		}
		if err := seq.Append(id); err != nil {
			return err
		}
	}
	decode := time.Since(decodeStart)
	rest := dec.Flush()
	if o.format == "text" {
		_, err := fmt.Fprintln(out, rest)
		return err
	}
	return enc.Encode(doneLine{
		Done: true, Reason: reason,
		PromptTokens: len(ids), GeneratedTokens: generated,
		PrefillTPS: rate(len(ids), prefill), DecodeTPS: rate(generated-1, decode),
		Backend: m.Backend().Name(), Text: rest,
	})
}

func jsonToken(id int32, text string, top []sample.Logit, k int) map[string]any {
	line := map[string]any{"id": id, "text": text}
	if k > 0 {
		pairs := make([][2]any, len(top))
		for i, t := range top {
			pairs[i] = [2]any{t.ID, t.Logit}
		}
		line["top"] = pairs
	}
	return line
}

func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
