//go:build cgo && !nogpu

package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu" // registers the "gpu" backend
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/slots"
)

func init() {
	register(command{
		name:    "gpu",
		summary: "list WebGPU adapters, or profile a model's phases on the GPU",
		run:     runGPU,
	})
}

func runGPU(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gpu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "GGUF model to profile (empty: list adapters only)")
	adapter := fs.String("adapter", "", "use the first adapter whose description contains this")
	gen := fs.Int("n", 128, "tokens to decode while profiling")
	prompt := fs.Int("p", 512, "prompt tokens to prefill first")
	micro := fs.Bool("micro", false, "also time single ops (50 dispatches each) on the model's shapes")
	plain := fs.Bool("plain", true, "time plain and profiled decoding after the warm-up (false: only the warm-up and the chained loop)")
	chained := fs.Bool("chained", true, "also time greedy decoding with the host off the critical path (argmax and the next embedding on the GPU)")
	o := gpuOptions()
	fs.BoolVar(&o.AllowSoftware, "software", o.AllowSoftware, "admit software adapters (lavapipe, llvmpipe; default from BONSAI_GPU_SOFTWARE=1)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai gpu [flags]              list the WebGPU adapters")
		fmt.Fprintln(stderr, "       bonsai gpu --model FILE [flags]  profile the model's phases on the GPU")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: gpu: unexpected argument %q", errUsage, pos[0])
	}
	list, err := gpu.ListAdapters(o.Debug)
	if err != nil {
		return err
	}
	for i, a := range list {
		fmt.Fprintf(stdout, "adapter %d: %s\n", i, a)
	}
	if *model == "" {
		return nil
	}
	f, err := gguf.Open(*model)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := infer.Load(f, infer.Options{Backend: "gpu", Adapter: *adapter, GPU: o, Context: max(*prompt+*gen+3, 1024)})
	if err != nil {
		return err
	}
	defer m.Close()
	b := m.Backend()
	fmt.Fprintf(stdout, "backend: %s\n", b.Info().Adapter)
	for _, d := range b.Info().Details {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	// The prompt: at least one token, which the first decoding step
	// follows.
	toks := make([]int32, max(*prompt, 1))
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	// Each run decodes through the product's one decode loop (a one-slot
	// scheduler, as the chat's engine builds it), greedily, gen tokens
	// after the one the prompt's pass gives; pp is timed over the
	// prompt's reading, tg from its end to the last token.
	decode := func(chained bool, profiled bool) (pp, tg time.Duration, ppProf profile.Sample, err error) {
		b.SetProfiling(profiled)
		var start, read time.Time
		_, err = decodeOnce(m, toks, *gen+1, chained, func(p slots.Prefill) {
			switch p.Done {
			case 0: // the request has its slot: the reading starts
				start = time.Now()
			case p.Total:
				read = time.Now()
				ppProf = b.TakeProfile()
			}
		})
		return read.Sub(start), time.Since(read), ppProf, err
	}
	run := func(label string, profiled bool) error {
		pp, tg, ppProf, err := decode(false, profiled)
		if err != nil {
			return err
		}
		tgProf := b.TakeProfile()
		fmt.Fprintf(stdout, "%s: pp%d %.1f tok/s, tg%d %.1f tok/s, RSS %d MiB\n", label, len(toks), float64(len(toks))/pp.Seconds(), *gen, float64(*gen)/tg.Seconds(), rssMiB())
		if gb, ok := b.(*gpu.Backend); ok {
			fmt.Fprintf(stdout, "  dispatches per decode token: %d (%d layers): %s\n", gb.LastDispatches(), m.KVSpec().Layers, census(gb.LastCensus()))
		}
		if profiled {
			for _, s := range []struct {
				name string
				p    profile.Sample
			}{{"prefill", ppProf}, {"decode", tgProf}} {
				fmt.Fprintf(stdout, "  %s phases (%s, %d tokens, GPU time per token):\n", s.name, s.p.Source, s.p.Tokens)
				for ph := profile.Phase(0); ph < profile.NumPhases; ph++ {
					fmt.Fprintf(stdout, "    %-12s %10.1f µs\n", ph, float64(s.p.PerToken(ph).Nanoseconds())/1e3)
				}
				fmt.Fprintf(stdout, "    %-12s %10.1f µs\n", "total", float64(s.p.Total().Nanoseconds())/1e3/float64(max(s.p.Tokens, 1)))
			}
		}
		return nil
	}
	if err := run("warm-up", false); err != nil {
		return err
	}
	if *plain {
		if err := run("plain", false); err != nil {
			return err
		}
		if err := run("profiled", true); err != nil {
			return err
		}
	}
	if *chained && *gen > 0 && *prompt > 0 {
		// Greedy with the host off the critical path, as `bonsai run
		// --temp 0` decodes (infer/slots chain.go); the chain's own
		// kernels compile on the first run, untimed.
		if _, _, _, err := decode(true, false); err != nil {
			return err
		}
		pp, tg, _, err := decode(true, false)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "chained: tg%d %.1f tok/s (greedy, %v; the prefill %v)\n", *gen, float64(*gen)/tg.Seconds(), tg.Round(time.Millisecond), pp.Round(time.Millisecond))
	}
	if *micro {
		return microBench(m, stdout)
	}
	return nil
}

// census lists dispatches per kernel, most first.
func census(c map[string]int) string {
	names := slices.Collect(maps.Keys(c))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(c[b]-c[a], strings.Compare(a, b)) })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, c[n])
	}
	return strings.Join(parts, ", ")
}

// microBench times each op kind alone: 50 dispatches of it in one pass,
// wall clock around Commit (the GPU dominates), after one warm-up pass.
func microBench(m *infer.Model, stdout io.Writer) error {
	b := m.Backend()
	hp := m.Hparams
	weight := func(name string) (infer.Weight, error) {
		ti, ok := m.File.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("no tensor %s", name)
		}
		return b.LoadWeight(infer.WeightData{Name: ti.Name, Type: ti.Type, Shape: ti.Shape, Data: m.File.Data(ti)})
	}
	gate, err := weight("blk.0.ffn_gate.weight")
	if err != nil {
		return err
	}
	down, err := weight("blk.0.ffn_down.weight")
	if err != nil {
		return err
	}
	norm, err := weight("blk.0.ffn_norm.weight")
	if err != nil {
		return err
	}
	x, _ := b.NewTensor("mx", 1, hp.Embed)
	y, _ := b.NewTensor("my", 1, hp.Embed)
	f, _ := b.NewTensor("mf", 1, hp.FFN)
	f2, _ := b.NewTensor("mf2", 1, hp.FFN)
	q, _ := b.NewTensor("mq", 1, hp.Heads*hp.HeadDim)
	o, _ := b.NewTensor("mo", 1, hp.Heads*hp.HeadDim)
	attn := infer.Attn{Heads: hp.Heads, KVHeads: hp.KVHeads, HeadDim: hp.HeadDim, Scale: 0.088}
	// The norm is timed in place (rmsnorm.wgsl); into another tensor a
	// decode norm runs as act_q8, with the Q8_0 rounding the matvec
	// after it reads.
	cases := []struct {
		name string
		pos  int
		op   func()
	}{
		{"add 4096 (dispatch floor)", 600, func() { b.Add(y, y, x) }},
		{"rmsnorm 4096 (in place)", 600, func() { b.RMSNorm(y, y, norm, 1e-6) }},
		{"matvec gate 12288x4096", 600, func() { b.MatMul(f, gate, x); b.Add(y, y, x) }},
		{"rmsnorm + gate", 600, func() { b.RMSNorm(y, x, norm, 1e-6); b.MatMul(f, gate, y) }},
		{"matvec down 4096x12288", 600, func() { b.MatMul(x, down, f); b.Add(f2, f2, f) }},
		{"swiglu 12288", 600, func() { b.SwiGLU(f2, f, f2) }},
		{"attention pos 600 (3 passes)", 600, func() { b.Attention(o, q, 0, attn) }},
		{"attention pos 20 (one pass)", 20, func() { b.Attention(o, q, 0, attn) }},
	}
	for _, c := range cases {
		var best time.Duration
		for rep := 0; rep < 3; rep++ {
			b.Begin(infer.Batch{Tokens: []int32{1}, Pos: c.pos})
			for i := 0; i < 50; i++ {
				c.op()
			}
			start := time.Now()
			if err := b.Commit(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if d := time.Since(start); rep == 0 || d < best {
				best = d
			}
		}
		fmt.Fprintf(stdout, "micro %-32s %8.1f µs per op\n", c.name, float64(best.Microseconds())/50)
	}
	return nil
}

// decodeOnce generates n tokens greedily after prompt through a fresh
// one-slot scheduler (its cache empty: the whole prompt is read), chained
// where allowed and the model can; fewer than n is an error.
func decodeOnce(m *infer.Model, prompt []int32, n int, chained bool, prefill func(slots.Prefill)) (slots.Result, error) {
	sched, err := slots.New(slots.Options{Model: m, Slots: 1, Context: m.Context(), Forward: true})
	if err != nil {
		return slots.Result{}, err
	}
	defer sched.Close()
	return decodeAll(sched, slots.Request{
		Prompt: prompt, MaxTokens: n, Prefill: prefill,
		Chain: func() bool { return chained },
	})
}

// rssMiB is the resident set size (0 where /proc is missing).
func rssMiB() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, rss int64
	fmt.Sscan(string(data), &size, &rss)
	return rss * int64(os.Getpagesize()) >> 20
}
