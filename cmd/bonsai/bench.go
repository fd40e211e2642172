package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/sample"
	"github.com/bonsai-chat/bonsai/infer/slots"
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
	sampled bool  // tg also through the chained sampler, a test line of its own
	first   bool  // time the process's first two tg runs before any warm-up
	depths  []int // tokens already in the cache before each test (llama-bench's -d)
}

// benchResult is one test's speeds over the repetitions.
type benchResult struct {
	Model   string    `json:"model"`
	Backend string    `json:"backend"`
	Threads int       `json:"threads"`
	TypeK   string    `json:"type_k"` // the KV cache's types, as llama-bench's
	TypeV   string    `json:"type_v"`
	Test    string    `json:"test"` // "pp512", "tg128", "tg128 @ d4096"
	Tokens  int       `json:"tokens"`
	Depth   int       `json:"n_depth"` // tokens in the cache before the test
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
	cfgFlags := config.RegisterSettings(fs, "model", "backend", "adapter", "threads", "cache-type-k", "cache-type-v", "seed")
	fs.IntVar(&o.prompt, "p", 512, "prompt tokens per pp test (0: skip)")
	fs.IntVar(&o.gen, "n", 128, "generated tokens per tg test (0: skip)")
	fs.IntVar(&o.reps, "r", 5, "repetitions of each test")
	fs.StringVar(&o.format, "format", "text", "output: text (a llama-bench table) or json")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a Go CPU profile of the measured runs to this file")
	fs.BoolVar(&o.chained, "chained", true, "tg: decode greedily with the host off the critical path where the backend can (the GPU; as `bonsai run --temp 0` decodes), else one plain step per token")
	fs.BoolVar(&o.sampled, "sampled", false, "tg: also decode sampled (sample.Bonsai's settings) through the chained sampler where the backend has one, as `bonsai run` decodes at a temperature: a \"tg128 sampled\" line beside the greedy one")
	fs.BoolVar(&o.first, "first", false, "tg: also time the process's first and second tg runs at the first depth, before the warm-up (\"tg128 1st\", \"tg128 2nd\": a first reply that waits on compiles shows here)")
	fs.Func("d", "comma-separated depths: each test runs after this many tokens already in the cache, as llama-bench's -d (default 0)", func(v string) error {
		d, err := parseDepths(v)
		o.depths = append(o.depths, d...)
		return err
	})
	fs.BoolVar(&o.membw, "membw", false, "also measure the machine's read bandwidth at the same thread count and print each tg speed as a share of it")
	features := cpuFeaturesFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai bench [--model M] [--backend cpu|gpu|auto] [--threads N] [-p 512] [-n 128] [-d 0,4096] [--cache-type-k f16|q8_0] [--cache-type-v f16|q8_0] [-r 5] [--format text|json] [--membw] [--cpu-features all|avx2|portable]")
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

	if len(o.depths) == 0 {
		o.depths = []int{0}
	}

	if err := setCPUFeatures("bench", *features); err != nil {
		return err
	}
	cfg, err := loadConfig(cfgFlags, stderr)
	if err != nil {
		return err
	}
	kvTypes, err := cfg.KVTypes()
	if err != nil {
		return err
	}
	f, err := openModel(cfg.Model)
	if err != nil {
		return err
	}
	defer f.Close()
	// Like llama-bench: the whole prompt is one batch, the context holds the
	// deepest test.
	depth := slices.Max(o.depths)
	m, err := infer.Load(f, infer.Options{
		Backend: cfg.Backend, Adapter: cfg.Adapter, GPU: gpuOptions(), Threads: cfg.Threads,
		// tg's last step leaves room for the chained pass in flight
		// (infer/slots: a chain stops short of the slot's end)
		Context: depth + max(o.prompt, o.gen+2, 1),
		KV:      kvTypes,
		// the depth's tokens go in batches of llama-bench's default 512
		Batch: max(o.prompt, min(depth, 512), 1),
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
	ids := make([]int32, depth+max(o.prompt, o.gen))
	for i := range ids {
		ids[i] = int32(r.IntN(m.Hparams.Vocab))
	}
	// tg decodes through the product's one decode loop: a one-slot
	// scheduler run through Forward, as the chat's engine builds it.
	sched, err := slots.New(slots.Options{Model: m, Slots: 1, Context: m.Context(), Forward: true})
	if err != nil {
		return err
	}
	defer sched.Close()
	dec := benchDecoder{sched: sched, ids: ids, chained: o.chained}
	tg := func(d int) error { return dec.tg(d, o.gen, sample.Params{}) }
	var results []benchResult
	if o.first && o.gen > 0 {
		res, err := firstRuns(dec, o.depths[0], o, tg)
		if err != nil {
			return err
		}
		results = append(results, res...)
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

	for _, d := range o.depths {
		// A GPU compiles a decode kernel per length class (attention
		// rounds) and the chain's own on first use: one untimed tg run
		// at each depth warms them.
		res, err := benchAtDepth(m, dec, d, o, tg, info.Name == "gpu")
		if err != nil {
			return err
		}
		results = append(results, res...)
		if o.sampled && o.gen > 2 {
			res, err := sampledAtDepth(m, dec, d, o)
			if err != nil {
				return err
			}
			results = append(results, res...)
		}
	}
	for i := range results {
		results[i].Model, results[i].Backend, results[i].Threads, results[i].Seed = name, info.Name, threads, seed
		results[i].TypeK, results[i].TypeV = kvTypes.K.String(), kvTypes.V.String()
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
			res.BytesPerToken = tgBytes(f, m.Hparams, kvTypes, res.Depth, res.Tokens)
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
	testWidth := 6
	for _, res := range results {
		testWidth = max(testWidth, len(res.Test))
	}
	fmt.Fprintf(stdout, "| %-28s | %10s | %8s | %-8s | %7s | %*s | %16s |\n", "model", "size", "params", "backend", "threads", testWidth, "test", "t/s")
	fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s |\n", dashes(28), dashes(10), dashes(8), dashes(8), dashes(7), dashes(testWidth), dashes(16))
	for _, res := range results {
		bw := ""
		if res.ReadBW > 0 {
			bw = fmt.Sprintf("  %.0f%% of read bandwidth (%.0f MB/token, %.1f GB/s)", res.PctReadBW, res.BytesPerToken/1e6, res.Mean*res.BytesPerToken/1e9)
		}
		fmt.Fprintf(stdout, "| %-28s | %6.1f MiB | %6.2f B | %-8s | %7d | %*s | %7.2f ± %6.2f |%s\n",
			name, size, params, res.Backend, res.Threads, testWidth, res.Test, res.Mean, res.StdDev, bw)
	}
	fmt.Fprintf(stdout, "\n%s: %s (%s), KV cache %s, token ids from seed %d\n", info.Name, info.Adapter, info.SIMD, kvTypes, seed)
	return nil
}

// benchAtDepth runs the pp and tg tests after d tokens (ids[:d]) in the
// cache. The d tokens run once, untimed; each repetition then starts from
// them again (a recurrent network from its snapshot at d).
func benchAtDepth(m *infer.Model, dec benchDecoder, d int, o benchFlags, tg func(int) error, warm bool) ([]benchResult, error) {
	if err := dec.fill(d); err != nil {
		return nil, err
	}
	rewind := func() error { return nil }
	if d > 0 {
		rewind = func() error { return m.Restore(d) }
	}
	var results []benchResult
	if o.prompt > 0 {
		// One pass over the prompt, as llama-bench's pp: no decode loop.
		res, err := measure(o.reps, o.prompt, rewind, func() error { return m.Forward(dec.ids[d:d+o.prompt], d) })
		if err != nil {
			return nil, err
		}
		res.Test = fmt.Sprintf("pp%d%s", o.prompt, depthSuffix(d))
		res.Depth = d
		results = append(results, res)
	}
	if o.gen > 0 {
		// The scheduler takes the slot back to d itself (its cache
		// holds ids[:d], a recurrent state its snapshot there).
		if warm {
			if err := tg(d); err != nil {
				return nil, err
			}
		}
		res, err := measure(o.reps, o.gen, func() error { return nil }, func() error { return tg(d) })
		if err != nil {
			return nil, err
		}
		res.Test = fmt.Sprintf("tg%d%s", o.gen, depthSuffix(d))
		res.Depth = d
		results = append(results, res)
	}
	return results, nil
}

// sampledAtDepth is the tg test at depth d decoded through the chained
// sampler ("tg128 sampled"), as `bonsai run` decodes at a temperature, or
// nothing where the backend has none: at depth, greedy decoding should be
// no slower than sampled. The greedy test at d ran first: the slot's cache
// holds the depth.
func sampledAtDepth(m *infer.Model, dec benchDecoder, d int, o benchFlags) ([]benchResult, error) {
	p := sample.Bonsai(1)
	smp, err := sample.New(p)
	if err != nil {
		return nil, err
	}
	if infer.NewSequence(m).NewSampledChain(smp) == nil {
		return nil, nil
	}
	dec.chained = true // the chained sampler is the test, whatever --chained says of greedy
	run := func() error { return dec.tg(d, o.gen, p) }
	if err := run(); err != nil {
		return nil, err
	}
	res, err := measure(o.reps, o.gen, func() error { return nil }, run)
	if err != nil {
		return nil, err
	}
	res.Test = fmt.Sprintf("tg%d sampled%s", o.gen, depthSuffix(d))
	res.Depth = d
	return []benchResult{res}, nil
}

// firstRuns times the process's first two tg runs at depth d, before any
// warm-up ("tg128 1st", "tg128 2nd"): the first reply of a fresh process
// should be within 10 % of the second.
func firstRuns(dec benchDecoder, d int, o benchFlags, tg func(int) error) ([]benchResult, error) {
	if err := dec.fill(d); err != nil {
		return nil, err
	}
	var results []benchResult
	for _, name := range []string{"1st", "2nd"} {
		res, err := measure(1, o.gen, func() error { return nil }, func() error { return tg(d) })
		if err != nil {
			return nil, err
		}
		res.Test = fmt.Sprintf("tg%d %s%s", o.gen, name, depthSuffix(d))
		res.Depth = d
		results = append(results, res)
	}
	return results, nil
}

func depthSuffix(d int) string {
	if d > 0 {
		return fmt.Sprintf(" @ d%d", d)
	}
	return ""
}

// parseDepths reads -d's comma-separated list of depths.
func parseDepths(v string) ([]int, error) {
	var ds []int
	for f := range strings.SplitSeq(v, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("depth %q: want a whole number of tokens, 0 or more", f)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// measure runs one test reps times, each after setup (untimed), and returns
// its speeds in tokens/s.
func measure(reps, tokens int, setup, run func() error) (benchResult, error) {
	res := benchResult{Tokens: tokens}
	for range reps {
		if err := setup(); err != nil {
			return res, err
		}
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

// benchDecoder runs bench's decoding through the product's one decode
// loop (infer/slots), whose slot keeps its cache between requests: a tg
// test after d tokens re-reads none of them.
type benchDecoder struct {
	sched   *slots.Scheduler
	ids     []int32 // the random token ids: speed does not depend on them
	chained bool    // greedy steps may run chained (--chained)
}

// fill puts ids[:d] in the slot's cache, untimed; a recurrent state is
// snapshotted at d, where each repetition starts again.
func (b benchDecoder) fill(d int) error {
	if d == 0 {
		return nil
	}
	if _, err := b.decode(b.ids[:d], 1, sample.Params{}, []int{d}); err != nil {
		return fmt.Errorf("filling the cache to depth %d: %w", d, err)
	}
	return nil
}

// tg decodes n tokens after the d in the cache: ids[d] is read (the first
// of n one-token passes, as llama-bench's tg), then the model's own tokens,
// sampled with p, stand in for llama-bench's random ones, each a pass of
// its own until the nth is sampled.
func (b benchDecoder) tg(d, n int, p sample.Params) error {
	var marks []int
	if d > 0 {
		marks = []int{d}
	}
	res, err := b.decode(b.ids[:d+1], n, p, marks)
	if err == nil && res.CachedTokens != d {
		// else the test would time the depth's reading too
		err = fmt.Errorf("tg at depth %d: the slot kept %d of its tokens", d, res.CachedTokens)
	}
	return err
}

// decode runs one request to n tokens.
func (b benchDecoder) decode(prompt []int32, n int, p sample.Params, marks []int) (slots.Result, error) {
	return decodeAll(b.sched, slots.Request{
		Prompt: prompt, Params: p, MaxTokens: n, Marks: marks,
		Chain: func() bool { return b.chained },
	})
}

// decodeAll runs r to its end; fewer tokens than r.MaxTokens is an error.
func decodeAll(sched *slots.Scheduler, r slots.Request) (slots.Result, error) {
	st, err := sched.Submit(context.Background(), r)
	if err != nil {
		return slots.Result{}, err
	}
	for _, done := st.Next(); !done; _, done = st.Next() {
	}
	res := st.Result()
	switch {
	case res.Err != nil:
		return res, res.Err
	case res.CompletionTokens != r.MaxTokens:
		return res, fmt.Errorf("decoded %d tokens of %d (%s)", res.CompletionTokens, r.MaxTokens, res.Reason)
	}
	return res, nil
}
