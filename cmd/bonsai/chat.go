package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/adrg/xdg"
	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/engine"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/remote"
	"github.com/bonsai-chat/bonsai/session"
	"github.com/bonsai-chat/bonsai/tui"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"golang.org/x/term"
)

func init() {
	defaultCommand = runChat
	register(command{name: "chat", summary: "open the chat (also what bonsai does with no command)", run: runChat})
}

// runChat opens the chat TUI on the configured model.
func runChat(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bonsai", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flags := config.RegisterFlags(fs)
	dbPath := fs.String("db", "", "conversation database `file` (default: $XDG_DATA_HOME/bonsai/bonsai.db)")
	noSave := fs.Bool("no-save", false, "keep nothing: no conversation database, no prompt history")
	mouse := fs.Bool("mouse", false, "scroll with the mouse wheel (the terminal's own text selection then needs shift)")
	remoteFlag := fs.String("remote", "", "answer from an OpenAI-compatible server: its base URL (http://host:8000/v1) or a [[remote]] name of config.toml")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai [flags]   open the chat")
		fmt.Fprintln(stderr, "       bonsai -c        continue the last chat")
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
		return fmt.Errorf("%w: unknown command %q (see 'bonsai help')", errUsage, pos[0])
	}
	if !chatTerminal() {
		return fmt.Errorf("%w: the chat needs a terminal; for scripts use 'bonsai run PROMPT'", errUsage)
	}
	cfg, err := loadConfig(flags, nil) // the chat shows the warnings as notices
	if err != nil {
		return err
	}
	kvTypes, err := cfg.KVTypes()
	if err != nil {
		return err
	}
	keys, err := keyMap(cfg)
	if err != nil {
		return err
	}
	// The model is opened and checked here, before the terminal is taken
	// over: a file bonsai cannot run is refused with the reason, not shown
	// as a chat whose engine has stopped.
	var (
		modelPath string
		modelFile *gguf.File
		ctxSize   int
		rem       config.Remote
	)
	if *remoteFlag != "" {
		if rem, err = cfg.RemoteFor(*remoteFlag); err != nil {
			return err
		}
		modelPath = rem.BaseURL
	} else {
		var hp infer.Hyperparams
		if modelPath, modelFile, hp, err = openChatModel(cfg.Model); err != nil {
			return err
		}
		defer modelFile.Close()
		ctxSize = chatContext(cfg, hp)
	}
	notices := append([]string(nil), cfg.Warnings...)

	opts := tui.Options{
		Think:     cfg.Think,
		System:    cfg.SystemPrompt,
		ModelPath: modelPath,
		Keys:      &keys,
		Sampling:  cfg.SamplingFor,
		SettingOrigin: func(name string) string {
			if src := cfg.Sources["sampling."+name]; src.Origin != config.FromDefault {
				return src.String()
			}
			return ""
		},
		Clipboard:    tui.SystemClipboard(tui.ProcessClipboardEnv()),
		ExportDir:    filepath.Join(xdg.DataHome, "bonsai", "exports"),
		BuiltinModel: defaultmodel.Path,
	}
	if home, err := os.UserHomeDir(); err == nil {
		opts.HomeDir = home
	}
	stateDir := "" // where sessions' model state is saved (resume.go); none without a database
	if !*noSave {
		store, resume, state, statePath, warn, err := openChatStorage(*dbPath, flags)
		if err != nil {
			return err
		}
		if store != nil {
			defer store.Close()
		}
		notices = append(notices, warn...)
		opts.Store, opts.Resume, opts.State, opts.StatePath = store, resume, state, statePath
		if path, err := sessionDBPath(*dbPath); err == nil && store != nil && cfg.ResumeCacheMB > 0 {
			stateDir = chatStateDir(path)
			pruneChatStates(store, stateDir)
		}
	}
	opts.Notices = notices

	// Colours: the terminal's profile (NO_COLOR gives Ascii) and background,
	// asked once before the UI starts, unless the config fixes the theme.
	opts.Profile = lipgloss.ColorProfile()
	switch cfg.Theme {
	case "dark":
		opts.Dark = true
	case "light":
		opts.Dark = false
	default:
		opts.Dark = opts.Profile == termenv.Ascii || lipgloss.HasDarkBackground()
	}
	lipgloss.SetHasDarkBackground(opts.Dark)

	profile := opts.State != nil && opts.State.Panels["profile"]
	// Native libraries (Mesa, wgpu) write to file descriptor 2 while the
	// GPU is probed, which the engine does at once: the log gets it, not
	// the terminal the UI is about to draw on.
	if restore, err := captureStderr(); err == nil {
		defer restore()
	}
	// The engine starts loading at once; the UI shows its progress.
	specOpts, err := resolveSpec(cfg.Spec, cfg.Draft)
	if err != nil {
		return err
	}
	// With --remote or [[remote]] entries, a remote.Switcher lets
	// /backend remote:NAME and /backend cpu move between them.
	remoteOpts := func(r config.Remote) remote.Options {
		key := ""
		if r.APIKeyEnv != "" {
			key = os.Getenv(r.APIKeyEnv)
		}
		proto, _ := remote.ParseProtocol(r.Protocol) // RemoteFor checked it
		return remote.Options{BaseURL: r.BaseURL, APIKey: key, Model: r.Model, Name: r.Name, Context: r.ContextSize, Protocol: proto}
	}
	resolve := func(name string) (remote.Options, error) {
		r, err := cfg.RemoteFor(name)
		return remoteOpts(r), err
	}
	var eng engine.Client
	switch {
	case *remoteFlag != "":
		eng = remote.NewSwitcher(nil, remote.New(remoteOpts(rem)), resolve)
	default:
		local := engine.New(engine.Options{
			File: modelFile, Backend: cfg.Backend, Adapter: cfg.Adapter, GPU: gpuOptions(), Threads: cfg.Threads, Context: ctxSize, KV: kvTypes, Profile: profile,
			Spec: specOpts, Open: openModelPath, StateDir: stateDir, StateBudget: int64(cfg.ResumeCacheMB) << 20,
		})
		defer local.Close()
		// Settings the engine cannot start with (a context this machine
		// cannot hold, a GPU it does not have) are refused here, with
		// the reason, as `bonsai run` refuses them; a load that fails
		// later leaves a chat that can switch backend or model.
		if err := local.Started(); err != nil {
			return fmt.Errorf("cannot start the model: %w", err)
		}
		eng = local
		if len(cfg.Remotes) > 0 {
			eng = remote.NewSwitcher(local, local, resolve)
		}
	}
	defer eng.Close()
	opts.Engine = eng
	if *mouse {
		return runTUI(opts, tea.WithMouseCellMotion())
	}
	return runTUI(opts)
}

// chatTerminal says whether stdin and stdout are a terminal; runTUI runs
// the chat on it. Tests replace both to reach the checks made before.
var (
	chatTerminal = func() bool { return isTerminal(os.Stdin) && isTerminal(os.Stdout) }
	runTUI       = tui.Run
)

// openModelPath opens a file the chat's /model names, the built-in model
// by its path.
func openModelPath(path string) (*gguf.File, error) {
	if path == defaultmodel.Path {
		return defaultmodel.Open()
	}
	return gguf.Open(path)
}

// openChatModel turns the model setting into an open file that bonsai can
// run: a path, a registry name already pulled, or a file in the models
// directory. No model configured means the embedded default model,
// bonsai-tiny, so that a fresh install chats at once, offline. A file that
// is not a GGUF, or whose architecture bonsai does not run, is an error.
func openChatModel(name string) (path string, f *gguf.File, hp infer.Hyperparams, err error) {
	if name == "" {
		path = defaultmodel.Path
		f, err = defaultmodel.Open()
	} else {
		path, err = hub.Resolve(name, hub.DefaultDir())
		if err == nil {
			f, err = openModelPath(path)
		}
	}
	if err == nil {
		hp, err = runnableHyperparams(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		return "", nil, hp, fmt.Errorf("model %q: %w", name, err)
	}
	return path, f, hp, nil
}

// runnableHyperparams reads f's sizes through its registered architecture;
// an architecture bonsai does not run is an error wrapping
// infer.ErrUnsupportedArch.
func runnableHyperparams(f *gguf.File) (infer.Hyperparams, error) {
	name, err := infer.ArchOf(f)
	if err != nil {
		return infer.Hyperparams{}, err
	}
	arch, err := infer.LookupArch(name)
	if err != nil {
		return infer.Hyperparams{}, err
	}
	return arch.Hyperparams(f)
}

// chatContext is the KV cache size to ask the engine for. Left at its
// default, it is 0: the engine's default capped by the model's trained
// context (and by each model loaded later with /model). A size the user
// set is kept; the engine says so when it exceeds what the model was
// trained on (infer.Model.Notes).
func chatContext(cfg *config.Config, hp infer.Hyperparams) int {
	if cfg.Sources["context_size"].Origin == config.FromDefault {
		return 0
	}
	return cfg.ContextSize
}

// keyMap applies the configuration's [keys] overrides, refusing a bad one
// with where it was written.
func keyMap(cfg *config.Config) (tui.KeyMap, error) {
	keys := tui.DefaultKeyMap()
	if err := keys.Override(cfg.Keys); err != nil {
		var ke *tui.KeyError
		if errors.As(err, &ke) {
			return keys, fmt.Errorf("keys.%s = %q (%s): %w: %w", ke.Action, cfg.Keys[ke.Action], cfg.Sources["keys."+ke.Action], config.ErrInvalid, ke.Err)
		}
		return keys, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	return keys, nil
}

// openChatStorage opens the conversation database and the UI state file,
// and the session to resume (-c or --session ID). A database that cannot be
// opened does not stop the chat: it runs without saving and says so. Asking
// for a session that does not exist is an error.
func openChatStorage(dbFlag string, flags *config.Flags) (store *session.Store, resume *session.Session,
	state *config.State, statePath string, warnings []string, err error) {
	if statePath, err = config.StatePath(); err != nil {
		warnings = append(warnings, "prompt history and panels are not remembered: "+err.Error())
		statePath = ""
	} else if state, err = config.LoadState(statePath); err != nil {
		warnings = append(warnings, err.Error()+" (starting from an empty state)")
	}
	err = nil
	path, perr := sessionDBPath(dbFlag)
	if perr == nil {
		store, perr = session.Open(path)
	}
	if perr != nil {
		if flags.Continue || flags.Session != 0 {
			return nil, nil, nil, "", nil, fmt.Errorf("cannot resume: %w", perr)
		}
		warnings = append(warnings, "this chat is not being saved: "+perr.Error())
		return nil, nil, state, statePath, warnings, nil
	}
	ctx := context.Background()
	switch {
	case flags.Session != 0:
		resume, err = store.Load(ctx, flags.Session)
		if err != nil {
			store.Close()
			return nil, nil, nil, "", nil, fmt.Errorf("%w: --session %d: %w (see 'bonsai sessions')", errUsage, flags.Session, err)
		}
	case flags.Continue:
		resume, err = store.Last(ctx)
		if errors.Is(err, session.ErrNotFound) {
			warnings = append(warnings, "no saved chat to continue; starting a new one")
			resume, err = nil, nil
		} else if err != nil {
			store.Close()
			return nil, nil, nil, "", nil, fmt.Errorf("continue: %w", err)
		}
	}
	return store, resume, state, statePath, warnings, nil
}

// isTerminal reports whether f is a terminal (the chat needs one). A
// character device is not enough: /dev/null is one.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
