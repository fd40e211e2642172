package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/tokenizer"
)

func init() {
	register(command{
		name:    "perplexity",
		summary: "measure a model's perplexity on a text or a token file",
		run:     runPerplexity,
	})
}

func runPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The model, backend and threads are the configuration's, as the
	// chat's; --ctx here is the window length, not context_size.
	cfgFlags := config.RegisterSettings(fs, "model", "backend", "adapter", "threads")
	textFile := fs.String("text", "", "UTF-8 text file to score (tokenized without special tokens)")
	tokenFile := fs.String("tokens", "", "file of little-endian uint32 token ids to score (as train.py's val.bin)")
	ctx := fs.Int("ctx", 512, "window length: the text is cut into windows of this many tokens")
	windows := fs.Int("windows", 0, "score only the first N windows (0: all)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai perplexity --model M (--text FILE | --tokens FILE) [--ctx N] [--windows N]")
		fmt.Fprintln(stderr, "Each window's tokens 1..N-1 are scored given the tokens before them in the window,")
		fmt.Fprintln(stderr, "as tools/train-default/train.py scores its held-out set.")
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
		return fmt.Errorf("%w: perplexity: unexpected argument %q", errUsage, pos[0])
	}
	if (*textFile == "") == (*tokenFile == "") {
		fs.Usage()
		return fmt.Errorf("%w: give exactly one of --text and --tokens", errUsage)
	}
	if *ctx < 2 {
		return fmt.Errorf("%w: --ctx %d: need at least 2", errUsage, *ctx)
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

	var ids []int32
	if *tokenFile != "" {
		if ids, err = readTokenFile(*tokenFile); err != nil {
			return err
		}
	} else {
		text, err := os.ReadFile(*textFile)
		if err != nil {
			return err
		}
		tok, err := tokenizer.FromGGUF(f.KV)
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		ids = tok.Encode(string(text), false)
	}
	n := len(ids) / *ctx
	if *windows > 0 {
		n = min(n, *windows)
	}
	if n == 0 {
		return fmt.Errorf("%d tokens do not fill one window of %d", len(ids), *ctx)
	}

	m, err := infer.Load(f, infer.Options{Backend: cfg.Backend, Adapter: cfg.Adapter, GPU: gpuOptions(), Threads: cfg.Threads, Context: *ctx})
	if err != nil {
		return err
	}
	defer m.Close()
	var total float64
	for w := range n {
		nll, err := windowNLL(m, ids[w**ctx:(w+1)**ctx])
		if err != nil {
			return err
		}
		total += nll
		fmt.Fprintf(stdout, "window %d: nll %.6f ppl %s\n", w, nll, formatPPL(math.Exp(nll)))
	}
	mean := total / float64(n)
	_, err = fmt.Fprintf(stdout, "perplexity %s (mean nll %.6f over %d windows of %d tokens, %s backend)\n",
		formatPPL(math.Exp(mean)), mean, n, *ctx, m.Backend().Name())
	return err
}

// formatPPL writes a perplexity with five significant digits: a random
// model's runs to 1e30 and more, which %f spells in 30 digits.
func formatPPL(p float64) string {
	if p >= 1e6 {
		return strconv.FormatFloat(p, 'e', 4, 64)
	}
	return strconv.FormatFloat(p, 'f', 4, 64)
}

// windowNLL is the mean negative log-likelihood of window[1:], each token
// given those before it, running the window one token at a time so every
// position's logits are seen.
func windowNLL(m *infer.Model, window []int32) (float64, error) {
	var sum float64
	for i := 0; i+1 < len(window); i++ {
		if err := m.Forward(window[i:i+1], i); err != nil {
			return 0, err
		}
		sum += tokenNLL(m.Logits(), window[i+1])
	}
	return sum / float64(len(window)-1), nil
}

// tokenNLL is -log softmax(logits)[target], computed in float64.
func tokenNLL(logits []float32, target int32) float64 {
	maxLogit := math.Inf(-1)
	for _, l := range logits {
		maxLogit = max(maxLogit, float64(l))
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - maxLogit)
	}
	return maxLogit + math.Log(sum) - float64(logits[target])
}

func readTokenFile(path string) ([]int32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of uint32 tokens", path, len(data))
	}
	ids := make([]int32, len(data)/4)
	for i := range ids {
		v := binary.LittleEndian.Uint32(data[4*i:])
		if v > math.MaxInt32 {
			return nil, fmt.Errorf("%s: token %d is %d, not an id", path, i, v)
		}
		ids[i] = int32(v)
	}
	return ids, nil
}
