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
	"path/filepath"
	"runtime/pprof"
	"time"

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
	model   string
	backend string
	threads int
	prompt  int
	gen     int
	reps    int
	format  string
	cpuProf string
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
}

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o benchFlags
	fs.StringVar(&o.model, "model", "", "model: a GGUF file path")
	fs.StringVar(&o.backend, "backend", "cpu", "cpu, gpu or auto")
	fs.IntVar(&o.threads, "threads", 0, "CPU threads (0: one per core)")
	fs.IntVar(&o.prompt, "p", 512, "prompt tokens per pp test (0: skip)")
	fs.IntVar(&o.gen, "n", 128, "generated tokens per tg test (0: skip)")
	fs.IntVar(&o.reps, "r", 5, "repetitions of each test")
	fs.StringVar(&o.format, "format", "text", "output: text (a llama-bench table) or json")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a Go CPU profile of the measured runs to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai bench [--model M] [--backend cpu|gpu] [--threads N] [-p 512] [-n 128] [-r 5] [--format text|json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: bench: unexpected argument %q", errUsage, fs.Arg(0))
	case o.prompt < 0 || o.gen < 0 || o.threads < 0:
		return fmt.Errorf("%w: bench: -p, -n and --threads must not be negative", errUsage)
	case o.reps < 1:
		return fmt.Errorf("%w: bench: -r must be at least 1", errUsage)
	case o.prompt == 0 && o.gen == 0:
		return fmt.Errorf("%w: bench: nothing to measure with -p 0 and -n 0", errUsage)
	case o.format != "text" && o.format != "json":
		return fmt.Errorf("%w: bench: --format %q: want text or json", errUsage, o.format)
	}

	f, err := openModel(o.model)
	if err != nil {
		return err
	}
	defer f.Close()
	// Like llama-bench: the whole prompt is one batch, the context holds the
	// longest test.
	m, err := infer.Load(f, infer.Options{
		Backend: o.backend, Threads: o.threads, GPU: gpuOptions(),
		Context: max(o.prompt, o.gen, 1),
		Batch:   max(o.prompt, 1),
	})
	if err != nil {
		return err
	}
	defer m.Close()

	info := m.Backend().Info()
	threads := o.threads
	if threads == 0 {
		threads = info.Threads
	}
	name := filepath.Base(o.model)
	// Random token ids, as llama-bench uses: speed does not depend on them.
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, max(o.prompt, o.gen))
	for i := range ids {
		ids[i] = int32(r.IntN(m.Hparams.Vocab))
	}
	// One warm-up token: first-touch page faults of the mapping and the
	// backend's lazy setup are not what we measure.
	if err := m.Forward(ids[:1], 0); err != nil {
		return err
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
		res, err := measure(o.reps, o.gen, func() error {
			for i := range o.gen {
				if err := m.Forward(ids[i:i+1], i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		res.Test = fmt.Sprintf("tg%d", o.gen)
		results = append(results, res)
	}
	for i := range results {
		results[i].Model, results[i].Backend, results[i].Threads = name, info.Name, threads
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
		fmt.Fprintf(stdout, "| %-28s | %6.1f MiB | %6.2f B | %-8s | %7d | %6s | %7.2f ± %6.2f |\n",
			name, size, params, res.Backend, res.Threads, res.Test, res.Mean, res.StdDev)
	}
	fmt.Fprintf(stdout, "\n%s: %s (%s)\n", info.Name, info.Adapter, info.SIMD)
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
