package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // registers the "cpu" backend
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
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
}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runFlags
	fs.StringVar(&o.model, "model", "", "model: a GGUF file path, a registry name or a file in the models directory (default: the embedded bonsai-tiny)")
	fs.BoolVar(&o.raw, "raw", false, "send the prompt as is, without the chat template")
	fs.BoolVar(&o.think, "think", false, "let the model reason in <think> before answering (text: the reasoning goes to stderr)")
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

	// Sampling: the model's recommendation, then whatever the flags set.
	sampling := engine.DefaultSampling(infer.DetectVariant(f))
	if set["temp"] {
		sampling.Temperature = float32(*temp)
	}
	if set["top-k"] {
		sampling.TopK = *topK
	}
	if set["top-p"] {
		sampling.TopP = float32(*topP)
	}
	if set["min-p"] {
		sampling.MinP = float32(*minP)
	}
	if set["repeat-penalty"] {
		sampling.RepeatPenalty = float32(*repeat)
	}
	sampling.Seed = *seed
	if !set["seed"] {
		sampling.Seed = uint64(time.Now().UnixNano())
	}
	if err := sampling.Params().Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	prompt := fs.Arg(0)
	if o.raw && prompt == "" {
		return fmt.Errorf("%w: the prompt encodes to no tokens", errUsage)
	}
	req := engine.GenerateRequest{MaxTokens: o.maxTokens, Think: o.think, Sampling: &sampling,
		Steps: o.format == "jsonl", TopLogits: o.topLogits}
	if o.raw {
		req.Raw = prompt
	} else {
		req.Messages = []chat.Message{{Role: chat.RoleUser, Content: prompt}}
	}

	// The same engine as the chat's: one turn loop, one thinking parser.
	e := engine.New(engine.Options{File: f, Backend: o.backend, GPU: gpuOptions(), Threads: o.threads, Context: o.ctx,
		Profile: o.profile, ProfileEvery: math.MaxInt})
	defer e.Close()
	e.Generate(req)
	return stream(e, o, stdout, stderr)
}

// stream writes the engine's reply as it comes: in text mode the answer to
// out and any reasoning to errOut, in jsonl mode one object per sampled
// token and then a summary.
func stream(e *engine.Engine, o runFlags, out, errOut io.Writer) error {
	enc := json.NewEncoder(out)
	var (
		backend string
		held    string // text the decoder held back when the reply stopped
		prof    profile.Sample
		profs   int
		inThink bool
	)
	for ev := range e.Events() {
		switch ev := ev.(type) {
		case engine.Loaded:
			backend = ev.Info.Backend
		case engine.Error:
			return ev.Err
		case engine.Notice:
			fmt.Fprintln(errOut, ev.Text)
		case engine.Step:
			if ev.ID < 0 {
				held += ev.Text
				continue
			}
			if err := enc.Encode(jsonToken(ev.ID, ev.Text, ev.Top, o.topLogits)); err != nil {
				return err
			}
		case engine.Token:
			if o.format != "text" {
				continue
			}
			w := out
			if ev.Thinking {
				w = errOut
			} else if inThink {
				fmt.Fprintln(errOut)
			}
			inThink = ev.Thinking
			if _, err := io.WriteString(w, ev.Text); err != nil {
				return err
			}
		case engine.ProfileSample:
			prof.Source = ev.Sample.Source
			prof.Tokens += ev.Sample.Tokens
			for p, d := range ev.Sample.Phases {
				prof.Phases[p] += d
			}
			profs++
		case engine.Done:
			if o.profile && profs > 0 {
				printProfile(prof, errOut)
			}
			if o.format == "text" {
				_, err := fmt.Fprintln(out)
				return err
			}
			st := ev.Stats
			return enc.Encode(doneLine{
				Done: true, Reason: ev.Reason,
				PromptTokens: st.PrefillTokens, GeneratedTokens: st.DecodeTokens,
				PrefillTPS: st.PrefillTPS, DecodeTPS: st.DecodeTPS,
				Backend: backend, Text: held,
			})
		}
	}
	return errors.New("the engine stopped before the reply was done")
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
	// Text is what the stream decoder held back when the reply stopped (an
	// incomplete UTF-8 sequence), if anything.
	Text string `json:"text,omitempty"`
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
