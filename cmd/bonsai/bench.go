package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer"
)

func init() {
	register(command{
		name:    "bench",
		summary: "measure prompt processing and decoding speed, llama-bench style",
		run:     runBench,
	})
}

// benchFlags are `bonsai bench`'s options (llama-bench's names where they
// exist).
type benchFlags struct {
	prompt  int
	gen     int
	reps    int
	format  string
	cpuProf string
	membw   bool
	chained bool
}

// benchResult is one test's speeds over the repetitions.
type benchResult struct {
	Model   string    `json:"model"`
	Backend string    `json:"backend"`
	Threads int       `json:"threads"`
	Test    string    `json:"test"` // "pp512", "tg128"
	Tokens  int       `json:"tokens"`
	Samples []float64 `json:"samples_tps"`
	Mean    float64   `json:"avg_tps"`
	StdDev  float64   `json:"stddev_tps"`
	Seed    uint64    `json:"seed"` // of the random token ids
	// With --membw, for tg tests: the bytes one decoded token reads (the
	// weights and the KV cache it touches, averaged over the test's
	// positions), the machine's read bandwidth at the same thread count,
	// and the share of it the mean speed reaches.
	BytesPerToken float64 `json:"bytes_per_token,omitempty"`
	ReadBW        float64 `json:"read_bw_bytes_per_s,omitempty"`
	PctReadBW     float64 `json:"pct_read_bw,omitempty"`
}

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o benchFlags
	// The model, backend and threads are the configuration's, as the
	// chat's; the seed picks the token ids.
	cfgFlags := config.RegisterSettings(fs, "model", "backend", "adapter", "threads", "seed")
	fs.IntVar(&o.prompt, "p", 512, "prompt tokens per pp test (0: skip)")
	fs.IntVar(&o.gen, "n", 128, "generated tokens per tg test (0: skip)")
	fs.IntVar(&o.reps, "r", 5, "repetitions of each test")
	fs.StringVar(&o.format, "format", "text", "output: text (a llama-bench table) or json")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a Go CPU profile of the measured runs to this file")
	fs.BoolVar(&o.chained, "chained", true, "tg: decode greedily with the host off the critical path where the backend can (the GPU; as `bonsai run --temp 0` decodes), else one plain step per token")
	fs.BoolVar(&o.membw, "membw", false, "also measure the machine's read bandwidth at the same thread count and print each tg speed as a share of it")
	features := cpuFeaturesFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai bench [--model M] [--backend cpu|gpu|auto] [--threads N] [-p 512] [-n 128] [-r 5] [--format text|json] [--membw] [--cpu-features all|avx2|portable]")
		fmt.Fprintln(stderr, "Settings not given as flags come from config.toml and BONSAI_* variables, as the chat's do.")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("%w: bench: unexpected argument %q", errUsage, pos[0])
	case o.prompt < 0 || o.gen < 0:
		return fmt.Errorf("%w: bench: -p and -n must not be negative", errUsage)
	case o.reps < 1:
		return fmt.Errorf("%w: bench: -r must be at least 1", errUsage)
	case o.prompt == 0 && o.gen == 0:
		return fmt.Errorf("%w: bench: nothing to measure with -p 0 and -n 0", errUsage)
	case o.format != "text" && o.format != "json":
		return fmt.Errorf("%w: bench: --format %q: want text or json", errUsage, o.format)
	}

	if err := setCPUFeatures("bench", *features); err != nil {
		return err
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
	// Like llama-bench: the whole prompt is one batch, the context holds the
	// longest test.
	m, err := infer.Load(f, infer.Options{
		Backend: cfg.Backend, Adapter: cfg.Adapter, GPU: gpuOptions(), Threads: cfg.Threads,
		Context: max(o.prompt, o.gen, 1),
		Batch:   max(o.prompt, 1),
	})
	if err != nil {
		return err
	}
	defer m.Close()

	info := m.Backend().Info()
	threads := cfg.Threads
	if threads == 0 {
		threads = info.Threads
	}
	name := modelName(cfg.Model)
	// Random token ids, as llama-bench uses: speed does not depend on them.
	// They follow the one seed rule (config.Sampling.SeedFor), recorded.
	seed, _ := cfg.Sampling.SeedFor()
	r := rand.New(rand.NewPCG(seed, 0))
	ids := make([]int32, max(o.prompt, o.gen))
	for i := range ids {
		ids[i] = int32(r.IntN(m.Hparams.Vocab))
	}
	// Warm-up, as llama-bench's: one prompt pass of the test's size and
	// one token. First-touch page faults of the mapping and the backend's
	// lazy setup (a GPU compiles each kernel on its first use) are not
	// what we measure.
	if o.prompt > 1 {
		if err := m.Forward(ids[:o.prompt], 0); err != nil {
			return err
		}
	}
	if err := m.Forward(ids[:1], 0); err != nil {
		return err
	}
	tg := func() error {
		if o.chained && o.gen > 2 {
			if ok, err := chainedTG(m, ids[0], o.gen); ok || err != nil {
				return err
			}
		}
		for i := range o.gen {
			if err := m.Forward(ids[i:i+1], i); err != nil {
				return err
			}
		}
		return nil
	}
	// A GPU compiles a decode kernel per length class (attention rounds)
	// and the chain's own on first use: one tg run warms them all.
	if o.gen > 0 && info.Name == "gpu" {
		if err := tg(); err != nil {
			return err
		}
	}

	if o.cpuProf != "" {
		pf, err := os.Create(o.cpuProf)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var results []benchResult
	if o.prompt > 0 {
		res, err := measure(o.reps, o.prompt, func() error { return m.Forward(ids[:o.prompt], 0) })
		if err != nil {
			return err
		}
		res.Test = fmt.Sprintf("pp%d", o.prompt)
		results = append(results, res)
	}
	if o.gen > 0 {
		res, err := measure(o.reps, o.gen, tg)
		if err != nil {
			return err
		}
		res.Test = fmt.Sprintf("tg%d", o.gen)
		results = append(results, res)
	}
	for i := range results {
		results[i].Model, results[i].Backend, results[i].Threads, results[i].Seed = name, info.Name, threads, seed
	}
	if o.membw {
		// After the tests: the 2 GiB buffer must not evict the model
		// from the page cache before they run.
		bw := readBandwidth(threads, membwBytes, 5)
		for i := range results {
			if !strings.HasPrefix(results[i].Test, "tg") {
				continue
			}
			res := &results[i]
			res.BytesPerToken = tgBytes(f, m.Hparams, res.Tokens)
			res.ReadBW = bw
			res.PctReadBW = 100 * res.Mean * res.BytesPerToken / bw
		}
		if o.format != "json" {
			defer fmt.Fprintf(stdout, "read bandwidth: %.1f GB/s with %d threads (best of 5 passes over %d MiB)\n", bw/1e9, threads, membwBytes>>20)
		}
	}

	if o.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	size := float64(infer.WeightBytes(f)) / (1 << 20)
	params := float64(infer.Params(f)) / 1e9
	fmt.Fprintf(stdout, "| %-28s | %10s | %8s | %-8s | %7s | %6s | %16s |\n", "model", "size", "params", "backend", "threads", "test", "t/s")
	fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s |\n", dashes(28), dashes(10), dashes(8), dashes(8), dashes(7), dashes(6), dashes(16))
	for _, res := range results {
		bw := ""
		if res.ReadBW > 0 {
			bw = fmt.Sprintf("  %.0f%% of read bandwidth (%.0f MB/token, %.1f GB/s)", res.PctReadBW, res.BytesPerToken/1e6, res.Mean*res.BytesPerToken/1e9)
		}
		fmt.Fprintf(stdout, "| %-28s | %6.1f MiB | %6.2f B | %-8s | %7d | %6s | %7.2f ± %6.2f |%s\n",
			name, size, params, res.Backend, res.Threads, res.Test, res.Mean, res.StdDev, bw)
	}
	fmt.Fprintf(stdout, "\n%s: %s (%s), token ids from seed %d\n", info.Name, info.Adapter, info.SIMD, seed)
	return nil
}

// measure runs one test reps times and returns its speeds in tokens/s.
func measure(reps, tokens int, run func() error) (benchResult, error) {
	res := benchResult{Tokens: tokens}
	for range reps {
		start := time.Now()
		if err := run(); err != nil {
			return res, err
		}
		res.Samples = append(res.Samples, float64(tokens)/time.Since(start).Seconds())
	}
	res.Mean, res.StdDev = meanStdDev(res.Samples)
	return res, nil
}

// meanStdDev is the mean and the sample standard deviation (llama-bench's
// ±), 0 for a single sample.
func meanStdDev(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}

func dashes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}

// chainedTG decodes n tokens greedily from first at position 0 as a chain
// (infer.Chain: each pass's argmax stays on the device as the next pass's
// token, pass t+1 encoded while pass t runs), reporting false where the
// backend or network cannot chain. Speed does not depend on the token ids,
// so the model's own greedy tokens stand in for llama-bench's random ones.
func chainedTG(m *infer.Model, first int32, n int) (bool, error) {
	s := infer.NewSequence(m)
	c := s.NewChain()
	if c == nil {
		return false, nil
	}
	if _, err := s.Prefill([]int32{first}, nil); err != nil {
		return true, err
	}
	// n forward passes of one token, as the plain loop runs: the prefill,
	// n−2 chained passes from Next and the one Stop waits for
	tok := first
	for i := 1; i < n-1; i++ {
		next, err := c.Next(tok)
		if err != nil {
			return true, err
		}
		tok = next
	}
	_, _, err := c.Stop()
	return true, err
}
