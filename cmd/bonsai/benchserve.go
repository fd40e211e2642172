package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bonsai-chat/bonsai/infer/openai"
	"github.com/bonsai-chat/bonsai/infer/serve"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

func init() {
	register(command{
		name:    "bench-serve",
		summary: "load-test an OpenAI-compatible server (bonsai serve in-process, or --url): aggregate tok/s and time to first token for 1, 2, 4, 8 concurrent streams",
		run:     runBenchServe,
	})
}

func runBenchServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model to serve in-process (default: the embedded bonsai-tiny)")
	url := fs.String("url", "", "benchmark this server instead (an OpenAI base URL, e.g. http://host:8080/v1)")
	key := fs.String("api-key", "", "API key for --url")
	threads := fs.Int("threads", 0, "CPU threads of the in-process server (0: one per core)")
	streamList := fs.String("streams", "1,2,4,8", "concurrency levels, comma-separated")
	tokens := fs.Int("tokens", 128, "tokens each stream generates (ignore_eos: always this many)")
	promptWords := fs.Int("prompt-words", 24, "words of each stream's prompt (distinct per stream, so nothing is cached)")
	reps := fs.Int("r", 1, "repetitions of each level (the best is reported)")
	cpuProf := fs.String("cpuprofile", "", "write a Go CPU profile of the measured levels to this file")
	backend := fs.String("backend", "cpu", "the in-process server's backend: cpu or gpu")
	ctx := fs.Int("ctx", 512, "the in-process server's context per slot, in tokens")
	specMode := fs.String("spec", "off", "the in-process server's speculation: off or ngram (prompt lookup)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai bench-serve [--model M [--backend cpu|gpu] [--ctx N] | --url URL] [--threads N] [--streams 1,2,4,8] [--tokens 64] [-r N]")
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
		return fmt.Errorf("%w: bench-serve: unexpected argument %q", errUsage, pos[0])
	}
	var levels []int
	for _, f := range strings.Split(*streamList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%w: --streams %q", errUsage, *streamList)
		}
		levels = append(levels, n)
	}
	if *backend != "cpu" && *backend != "gpu" {
		return fmt.Errorf("%w: bench-serve: --backend %q (want cpu or gpu)", errUsage, *backend)
	}
	if *tokens < 2 || *reps < 1 || *promptWords < 1 || *ctx < 64 {
		return fmt.Errorf("%w: --tokens must be ≥ 2, -r and --prompt-words ≥ 1, --ctx ≥ 64", errUsage)
	}
	base := *url
	if base == "" {
		f, err := openModel(*model)
		if err != nil {
			return err
		}
		defer f.Close()
		mode, err := spec.ParseMode(*specMode)
		if err != nil || mode == spec.Draft {
			return fmt.Errorf("%w: bench-serve: --spec %q (want off or ngram)", errUsage, *specMode)
		}
		m, err := serve.LoadFile(f, serve.LoadOptions{ID: "bench", Slots: slices.Max(levels), Context: *ctx, Threads: *threads, Backend: *backend,
			GPU: gpuOptions(), Spec: spec.Options{Mode: mode}})
		if err != nil {
			return err
		}
		defer m.Close()
		srv := serve.New(serve.Options{})
		srv.SetModel(m)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: srv.Handler()}
		go hs.Serve(ln)
		defer hs.Close()
		base = "http://" + ln.Addr().String() + "/v1"
		fmt.Fprintf(stdout, "in-process bonsai serve: %s, %d slots, %s %s, %d threads\n", f.Path, m.Sched.Slots(), m.Info.Name, m.Info.Adapter, m.Info.Threads)
	}
	b := loadBench{base: strings.TrimRight(base, "/"), key: *key, tokens: *tokens, words: *promptWords}
	// One short request first: loads pages, warms the caches.
	if _, err := b.level(1, 1000); err != nil {
		return err
	}
	if *cpuProf != "" {
		pf, err := os.Create(*cpuProf)
		if err != nil {
			return fmt.Errorf("bench-serve: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("bench-serve: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(stdout, "%d tokens per stream, prompts of %d words\n", *tokens, *promptWords)
	fmt.Fprintf(stdout, "%8s %14s %14s %12s %12s %12s\n", "streams", "aggregate t/s", "per-stream t/s", "vs 1 stream", "TTFT median", "TTFT max")
	var single float64
	for li, n := range levels {
		var best levelResult
		for r := range *reps {
			res, err := b.level(n, (li+1)*100+r*10)
			if err != nil {
				return err
			}
			if res.aggregate > best.aggregate {
				best = res
			}
		}
		if n == 1 {
			single = best.aggregate
		}
		ratio := "-"
		if single > 0 {
			ratio = fmt.Sprintf("%.2fx", best.aggregate/single)
		}
		fmt.Fprintf(stdout, "%8d %14.1f %14.1f %12s %12s %12s\n", n, best.aggregate, best.aggregate/float64(n), ratio,
			best.ttftMedian.Round(time.Millisecond), best.ttftMax.Round(time.Millisecond))
	}
	return nil
}

type loadBench struct {
	base, key     string
	tokens, words int
}

type levelResult struct {
	aggregate           float64 // tokens per second of all streams while all decode
	ttftMedian, ttftMax time.Duration
}

type streamResult struct {
	ttft     time.Duration
	arrivals []time.Time // of each streamed piece of text
}

// level runs n streams at once. The aggregate counts the tokens that
// arrive, on all streams, while every stream is decoding: from the last
// stream's first token to the first stream's last one. Before that window
// some streams still prefill (their prompts arrived together), after it
// fewer than n decode; inside it the server runs n rows per step.
func (b *loadBench) level(n, seed int) (levelResult, error) {
	res := make([]streamResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i], errs[i] = b.stream(seed + i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return levelResult{}, err
	}
	var out levelResult
	var ttfts []time.Duration
	var from, to time.Time
	for i, r := range res {
		if len(r.arrivals) < 2 {
			return out, errors.New("a stream sent fewer than two pieces of text")
		}
		if first := r.arrivals[0]; i == 0 || first.After(from) {
			from = first
		}
		if last := r.arrivals[len(r.arrivals)-1]; i == 0 || last.Before(to) {
			to = last
		}
		ttfts = append(ttfts, r.ttft)
	}
	if !to.After(from) {
		return out, fmt.Errorf("no moment when all %d streams decoded: make --tokens larger", n)
	}
	tokens := 0
	for _, r := range res {
		for _, at := range r.arrivals {
			// The window's first arrival on each stream opens an interval,
			// it does not fill one.
			if at.After(from) && !at.After(to) {
				tokens++
			}
		}
	}
	out.aggregate = float64(tokens) / to.Sub(from).Seconds()
	slices.Sort(ttfts)
	out.ttftMedian, out.ttftMax = ttfts[len(ttfts)/2], ttfts[len(ttfts)-1]
	return out, nil
}

var benchWords = strings.Fields("the quick brown fox jumps over a lazy dog while seven bright stars shine above quiet hills and rivers run to the sea")

func (b *loadBench) stream(seed int) (streamResult, error) {
	words := make([]string, b.words)
	for i := range words {
		words[i] = benchWords[(seed*7+i*3)%len(benchWords)]
	}
	body, _ := json.Marshal(map[string]any{
		"prompt": fmt.Sprintf("%d: %s", seed, strings.Join(words, " ")), "max_tokens": b.tokens, "temperature": 0,
		"stream": true, "ignore_eos": true,
	})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.base+"/completions", bytes.NewReader(body))
	if err != nil {
		return streamResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.key)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return streamResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return streamResult{}, fmt.Errorf("%s: %s", resp.Status, msg)
	}
	var out streamResult
	events := openai.NewEventReader(resp.Body)
	for {
		data, err := events.Next()
		if err != nil {
			return out, fmt.Errorf("the stream ended before [DONE]: %w", err)
		}
		if data == "[DONE]" {
			break
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return out, err
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
			now := time.Now()
			if out.ttft == 0 {
				out.ttft = now.Sub(start)
			}
			out.arrivals = append(out.arrivals, now)
		}
	}
	return out, nil
}
