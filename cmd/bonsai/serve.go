package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer/serve"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// serveSettings are the configuration's flags that `bonsai serve` takes.
var serveSettings = []string{"model", "backend", "adapter", "threads", "ctx", "cache-type-k", "cache-type-v", "spec"}

func init() {
	register(command{
		name:    "serve",
		summary: "serve the model over an OpenAI-compatible HTTP API (chat and text completions, several requests at once)",
		run:     runServe,
	})
}

// drainTimeout is how long a SIGINT/SIGTERM waits for the requests in
// flight before the server stops anyway.
const drainTimeout = 2 * time.Minute

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFlags := config.RegisterSettings(fs, serveSettings...)
	host := fs.String("host", "127.0.0.1", "address to listen on (loopback by default; another needs --api-key to be safe)")
	port := fs.Int("port", 8080, "port to listen on (0: any free port, printed at start)")
	apiKey := fs.String("api-key", "", "require Authorization: Bearer KEY on every route but /health")
	apiKeyFile := fs.String("api-key-file", "", "read the API key from this file (keeps it out of the process list)")
	parallel := fs.Int("parallel", 4, "requests decoded together, each in its own slot of the KV cache")
	batch := fs.Int("batch", 0, "most tokens per forward pass (0: 512)")
	maxDraft := fs.Int("max-draft", 0, fmt.Sprintf("with --spec ngram, most tokens drafted per slot and pass (0: %d, adapted as it goes)", spec.DefaultMaxDraft))
	alias := fs.String("alias", "", "the model's id in the API (default: the file's name)")
	maxBody := fs.Int64("max-body", serve.DefaultMaxBody, "largest request body in bytes")
	bodyTimeout := fs.Duration("body-timeout", serve.DefaultBodyTimeout, "longest a request body may take to arrive")
	cors := fs.String("cors", "", "web origins allowed to call the server from a browser, comma-separated (\"*\": any); off by default (config: serve.cors)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai serve [--model M] [--host 127.0.0.1] [--port 8080] [--api-key KEY | --api-key-file F]\n"+
			"                    [--parallel N] [--ctx N] [--threads N] [--batch N] [--backend cpu|gpu|auto] [--alias NAME]\n"+
			"                    [--spec ngram|off] [--max-draft N] [--cors ORIGIN[,ORIGIN…]]\n"+
			"Settings not given as flags come from config.toml and BONSAI_* variables, as the chat's do; the backend\n"+
			"is the CPU unless one is set (the GPU serves one request at a time), and --ctx is each slot's context.")
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
		return fmt.Errorf("%w: serve: unexpected argument %q", errUsage, pos[0])
	}
	if *apiKey != "" && *apiKeyFile != "" {
		return fmt.Errorf("%w: serve: --api-key and --api-key-file are exclusive", errUsage)
	}
	if *parallel < 1 || *batch < 0 || *port < 0 || *port > 65535 || *maxBody < 1 || *maxDraft < 0 || *bodyTimeout <= 0 {
		return fmt.Errorf("%w: serve: --parallel must be ≥ 1; --batch, --port and --max-draft must not be negative; --body-timeout must be positive", errUsage)
	}
	cfg, err := loadConfig(cfgFlags, stderr)
	if err != nil {
		return err
	}
	list := cfg.Serve.CORS
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "cors" {
			list = *cors
		}
	})
	origins, err := corsOrigins(list)
	if err != nil {
		return err
	}
	kvTypes, err := cfg.KVTypes()
	if err != nil {
		return err
	}
	backend := cfg.Backend
	if cfg.Sources["backend"].Origin == config.FromDefault {
		backend = "cpu" // slots decode together on the CPU; the GPU runs one at a time
	}
	// The slots draft by prompt lookup: "auto" means that here, whatever
	// draft model the configuration names for the chat.
	if m, err := spec.ParseMode(cfg.Spec); err == nil && m == spec.Draft {
		return fmt.Errorf("%w: serve: speculation with a draft model is not supported by the server (its slots draft by prompt lookup: --spec ngram)", errUsage)
	}
	specOpts, err := resolveSpec(cfg.Spec, "")
	if err != nil {
		return err
	}
	specOpts.MaxDraft = *maxDraft
	key := *apiKey
	if *apiKeyFile != "" {
		b, err := os.ReadFile(*apiKeyFile)
		if err != nil {
			return fmt.Errorf("serve: reading the API key: %w", err)
		}
		if key = strings.TrimSpace(string(b)); key == "" {
			return fmt.Errorf("serve: %s holds no API key", *apiKeyFile)
		}
	}

	// Listen before loading, so that /health says 503 while the model
	// loads instead of refusing connections.
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if key == "" && !serve.Loopback(*host) {
		fmt.Fprintf(stderr, "warning: listening on %s without an API key: anyone who can reach it can use it (--api-key-file)\n", *host)
	}
	var hosts []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "host" {
			hosts = append(hosts, *host) // the name the operator gave is one clients use
		}
	})
	srv := serve.New(serve.Options{APIKey: key, MaxBody: *maxBody, BodyTimeout: *bodyTimeout, Hosts: hosts, CORS: origins,
		Log: slog.New(slog.NewTextHandler(stderr, nil))})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(stdout, "bonsai serve: listening on http://%s (loading the model)\n", ln.Addr())

	sigs, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	f, err := openModel(cfg.Model)
	if err != nil {
		hs.Close()
		return err
	}
	defer f.Close()
	m, err := serve.LoadFile(f, serve.LoadOptions{ID: *alias, Slots: *parallel, Context: cfg.ContextSize, KV: kvTypes, Threads: cfg.Threads, Batch: *batch,
		Backend: backend, Adapter: cfg.Adapter, GPU: gpuOptions(), Spec: specOpts})
	if err != nil {
		hs.Close()
		return err
	}
	defer m.Close()
	for _, n := range m.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	srv.SetModel(m)
	fmt.Fprintf(stdout, "bonsai serve: ready: model %q, %d slots of %d tokens, %s (%d threads), speculation %s, on http://%s/v1\n",
		m.ID, m.Sched.Slots(), m.Sched.Context(), m.Info.Name, m.Info.Threads, m.Spec, ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-sigs.Done():
	}
	stop() // a second signal ends the process at once
	fmt.Fprintln(stdout, "bonsai serve: draining the requests in flight (a second Ctrl-C stops at once)")
	dctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := hs.Shutdown(dctx); err != nil {
		hs.Close()
		return fmt.Errorf("serve: draining: %w", err)
	}
	fmt.Fprintln(stdout, "bonsai serve: stopped")
	return nil
}

// corsOrigins reads --cors: origins such as https://app.example, or "*".
func corsOrigins(list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSuffix(strings.TrimSpace(o), "/")
		if o == "" {
			continue
		}
		if o != "*" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
				return nil, fmt.Errorf("%w: serve: --cors takes origins like https://app.example:8443 or *, not %q", errUsage, o)
			}
		}
		out = append(out, o)
	}
	return out, nil
}
