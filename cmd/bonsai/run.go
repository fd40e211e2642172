package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
	_ "github.com/bonsai-chat/bonsai/infer/cpu" // registers the "cpu" backend
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/remote"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/spec"
	"github.com/bonsai-chat/bonsai/tui"
)

func init() {
	register(command{
		name:    "run",
		summary: "generate a reply to a prompt and stream it to stdout",
		run:     runRun,
	})
}

// runFlags are `bonsai run`'s own options; the model, backend, context and
// sampling come from the configuration, as the chat's do.
type runFlags struct {
	raw       bool
	format    string
	topLogits int
	maxTokens int
	profile   bool
	spec      spec.Mode
	specAuto  bool // spec is the default's choice (off on the GPU)
	maxDraft  int
	think     bool   // --think: the reasoning goes to stderr, else nowhere
	cont      bool   // continue the last conversation (-c)
	noSave    bool   // keep no session of this run
	db        string // the conversation database (default: the XDG one)
}

// runSettings are the configuration's flags that `bonsai run` takes.
var runSettings = []string{"model", "backend", "adapter", "threads", "ctx", "cache-type-k", "cache-type-v", "think", "system",
	"temp", "top-k", "top-p", "min-p", "repeat-penalty", "seed", "spec", "draft"}

func runRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runFlags
	cfgFlags := config.RegisterSettings(fs, runSettings...)
	fs.BoolVar(&o.raw, "raw", false, "send the prompt as is, without the chat template")
	fs.StringVar(&o.format, "format", "text", "output: text, or jsonl (one JSON object per token, then a summary with the seed)")
	fs.IntVar(&o.topLogits, "top-logits", 0, "with --format jsonl, include the K largest logits of each step")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "stop after N generated tokens (0: end of turn or context)")
	fs.BoolVar(&o.profile, "profile", false, "print the time per forward-pass phase to stderr at the end")
	fs.BoolVar(&o.cont, "c", false, "continue the last conversation (the chat's or a run's): its turns come before PROMPT")
	fs.BoolVar(&o.cont, "continue", false, "the same as -c")
	fs.BoolVar(&o.noSave, "no-save", false, "keep no session of this run (by default runs are kept, as chats are: see 'bonsai sessions')")
	fs.StringVar(&o.db, "db", "", "conversation database `file` (default: $XDG_DATA_HOME/bonsai/bonsai.db)")
	features := cpuFeaturesFlag(fs)
	fs.IntVar(&o.maxDraft, "max-draft", 0, fmt.Sprintf("most tokens drafted per verify pass (0: %d, adapted as it goes)", spec.DefaultMaxDraft))
	remoteURL := fs.String("remote", "", "answer from an OpenAI-compatible server at this base URL (e.g. http://host:8000/v1) instead of a local model")
	remoteModel := fs.String("remote-model", "", "with --remote, the server's model (default: the first it lists)")
	remoteKeyEnv := fs.String("remote-key-env", "OPENAI_API_KEY", "with --remote, the environment variable holding the server's API key")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: bonsai run [flags] [PROMPT | -]\n"+
			"Generates one reply and streams it to stdout (with --think the reasoning goes to stderr).\n"+
			"Settings not given as flags come from config.toml and BONSAI_* variables, as the chat's do;\n"+
			"sampling the user leaves unset is the model's recommendation. --seed N (0 and up) repeats a\n"+
			"reply; without it each run draws a random seed, which --format jsonl records.\n\n"+promptHelp+"\n\nflags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if o.format != "text" && o.format != "jsonl" {
		return fmt.Errorf("%w: --format %q: want text or jsonl", errUsage, o.format)
	}
	if o.topLogits < 0 || o.maxTokens < 0 {
		return fmt.Errorf("%w: --top-logits and --max-tokens must not be negative", errUsage)
	}
	if err := setCPUFeatures("run", *features); err != nil {
		return err
	}
	prompt, err := runPrompt(pos, stdin)
	if err != nil {
		if errors.Is(err, errUsage) {
			fs.Usage()
		}
		return err
	}
	if o.raw && prompt == "" {
		return fmt.Errorf("%w: the prompt encodes to no tokens", errUsage)
	}
	if o.raw && o.cont {
		return fmt.Errorf("%w: -c continues a conversation, which --raw has none of", errUsage)
	}
	cfg, err := loadConfig(cfgFlags, stderr)
	if err != nil {
		return err
	}
	kvTypes, err := cfg.KVTypes()
	if err != nil {
		return err
	}
	specOpts, err := resolveSpec(cfg.Spec, cfg.Draft)
	if err != nil {
		return err
	}
	if o.maxDraft < 0 {
		return fmt.Errorf("%w: --max-draft must not be negative", errUsage)
	}
	specOpts.MaxDraft = o.maxDraft
	o.spec, o.specAuto = specOpts.Mode, specOpts.Auto
	o.think = cfg.Think

	var f *gguf.File
	var variant infer.Variant // a remote model's is unknown: llama.cpp's defaults
	if *remoteURL == "" {
		if f, err = openModel(cfg.Model); err != nil {
			return err
		}
		defer f.Close()
		variant = infer.DetectVariant(f)
	}

	// The chat's rule: the model's recommendation, then whatever the user
	// set, and the one seed rule (config.Sampling.SeedFor).
	sampling := cfg.SamplingFor(engine.DefaultSampling(variant))
	if err := sampling.Params().Validate(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	req := engine.GenerateRequest{MaxTokens: o.maxTokens, Think: cfg.Think, Sampling: &sampling,
		Steps: o.format == "jsonl", TopLogits: o.topLogits}
	kept, err := openRunLog(o.db, o.cont, !o.raw && !o.noSave, stderr)
	if err != nil {
		return err
	}
	defer kept.Close()
	system := cfg.SystemPrompt
	if o.raw {
		req.Raw = prompt
	} else {
		// A continued conversation keeps its own system prompt.
		if req.Messages = kept.history(); req.Messages != nil {
			system = ""
		}
		if system != "" {
			req.Messages = append(req.Messages, chat.Message{Role: chat.RoleSystem, Content: system})
		}
		req.Messages = append(req.Messages, chat.Message{Role: chat.RoleUser, Content: prompt})
	}

	// The same engine as the chat's: one turn loop, one thinking parser.
	var e engine.Client
	if *remoteURL != "" {
		e = remote.New(remote.Options{BaseURL: *remoteURL, APIKey: os.Getenv(*remoteKeyEnv), Model: *remoteModel, Context: cfg.ContextSize})
	} else {
		e = engine.New(engine.Options{File: f, Backend: cfg.Backend, Adapter: cfg.Adapter, GPU: gpuOptions(), Threads: cfg.Threads,
			Context: cfg.ContextSize, KV: kvTypes, Profile: o.profile, ProfileEvery: math.MaxInt, Spec: specOpts})
	}
	defer e.Close()
	e.Generate(req)
	reply, err := stream(e, o, sampling.Seed, stdout, stderr)
	if err != nil {
		return err
	}
	if err := kept.keep(system, prompt, reply); err != nil {
		fmt.Fprintf(stderr, "bonsai: this run was not saved: %v\n", err)
	}
	return nil
}

// stream writes the engine's reply as it comes: in text mode the answer to
// out and any reasoning to errOut, in jsonl mode one object per sampled
// token and then a summary.
func stream(e engine.Client, o runFlags, seed uint64, out, errOut io.Writer) (*runReply, error) {
	r := &runReply{}
	err := streamInto(r, e, o, seed, out, errOut)
	return r, err
}

// streamInto is stream, gathering the reply into r as it goes.
func streamInto(r *runReply, e engine.Client, o runFlags, seed uint64, out, errOut io.Writer) error {
	enc := json.NewEncoder(out)
	replyOut, thinkOut := onScreen(out), onScreen(errOut)
	var (
		backend string
		context int    // the loaded model's context, in tokens
		held    string // text the decoder held back when the reply stopped
		prof    profile.Sample
		profs   int
		inThink bool
	)
	for ev := range e.Events() {
		switch ev := ev.(type) {
		case engine.Loaded:
			r.info = ev.Info
			backend, context = ev.Info.Backend, ev.Info.ContextSize
		case engine.Error:
			if errors.Is(ev.Err, infer.ErrContextFull) {
				// The engine's words are the chat's (/new); a run has one
				// prompt, and --ctx is what makes room.
				return fmt.Errorf("%w: the prompt does not fit the context of %d tokens: "+
					"a larger --ctx (or context_size in config.toml), or a shorter prompt", infer.ErrContextFull, context)
			}
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
			if ev.Thinking {
				r.thinking.WriteString(ev.Text)
			} else {
				r.content.WriteString(ev.Text)
			}
			if o.format != "text" || ev.Thinking && !o.think {
				continue // a model or server that reasons unasked
			}
			w := replyOut
			if ev.Thinking {
				w = thinkOut
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
			r.done = ev
			if o.format == "text" {
				// The reply's line ends before anything else goes to the
				// terminal: stderr's notes start on a line of their own.
				if _, err := fmt.Fprintln(out); err != nil {
					return err
				}
			}
			if o.profile && profs > 0 {
				printProfile(prof, errOut)
			}
			if ev.Reason == "length" {
				fmt.Fprintln(errOut, cutNote(o.maxTokens, ev.Stats))
			}
			if o.format == "text" {
				return nil
			}
			st := ev.Stats
			mode := o.spec
			if o.specAuto && backend == "gpu" {
				mode = spec.Off // the engine skips the default's prompt lookup there
			}
			return enc.Encode(doneLine{
				Done: true, Reason: ev.Reason,
				PromptTokens: st.PrefillTokens, GeneratedTokens: st.DecodeTokens,
				PrefillTPS: st.PrefillTPS, DecodeTPS: st.DecodeTPS,
				Backend: backend, Seed: seed, Text: held,
				Spec: specLine{Mode: string(mode), Drafted: st.Drafted, Accepted: st.Accepted,
					Verifies: st.Verifies, AcceptRate: st.AcceptRate()},
			})
		}
	}
	return errors.New("the engine stopped before the reply was done")
}

// onScreen is w, or, when w is a terminal, w behind the printable filter
// the chat and the sessions commands use: a reply (a remote server's above
// all) may hold escape sequences that set the title, write the clipboard
// or clear the screen. A pipe or a file gets the text exactly.
func onScreen(w io.Writer) io.Writer {
	if !isTerminalWriter(w) {
		return w
	}
	return printableWriter{w}
}

type printableWriter struct{ w io.Writer }

// Write filters each write on its own: the engine writes whole tokens
// (never part of a UTF-8 sequence), and the filter maps each code point on
// its own.
func (p printableWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, tui.Printable(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// cutNote says why a reply ended before the model finished it, so that a
// script (and a person) can tell a cut reply from a whole one: the
// --max-tokens limit, or the context filling up.
func cutNote(maxTokens int, st engine.Stats) string {
	if maxTokens > 0 && st.DecodeTokens >= maxTokens {
		return fmt.Sprintf("bonsai: the reply was cut off at --max-tokens %d", maxTokens)
	}
	return fmt.Sprintf("bonsai: the reply was cut off: the context (%d tokens) is full; a larger --ctx makes room", st.ContextSize)
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

// openModel resolves --model (a path, a registry name, a file in the
// models directory or the built-in model's name, through infer/hub) and
// maps the file; no name means the built-in model (bonsai-tiny).
func openModel(name string) (*gguf.File, error) {
	if name == "" {
		return defaultmodel.Open()
	}
	path, err := hub.Resolve(name, hub.DefaultDir())
	if err != nil {
		return nil, err
	}
	f, err := openModelPath(path)
	if errors.Is(err, gguf.ErrNotGGUF) {
		return nil, notAModel{path, err}
	}
	return f, err
}

// notAModel is a file that is not a GGUF model, said in the user's words
// (the parser's names its first four bytes, "magic").
type notAModel struct {
	path string
	err  error
}

func (e notAModel) Error() string {
	return fmt.Sprintf("%s is not a GGUF model file; 'bonsai models' lists the models you have", e.path)
}

func (e notAModel) Unwrap() error { return e.err }

// modelName is how bench tables name the model setting: the file's base
// name, or the embedded model's name.
func modelName(setting string) string {
	if setting == "" {
		return defaultmodel.Name
	}
	return filepath.Base(setting)
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
	// Spec is what speculative decoding did.
	Spec specLine `json:"spec"`
	// Seed is the sampler's seed: --seed's, or the random one drawn.
	Seed uint64 `json:"seed"`
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
