package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/gpu" // registers the "gpu" backend
	"github.com/bonsai-chat/bonsai/infer/profile"
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *adapter != "" {
		os.Setenv(gpu.AdapterEnv, *adapter)
	}
	list, err := gpu.ListAdapters()
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
	m, err := infer.Load(f, infer.Options{Backend: "gpu", Context: max(*prompt+*gen+1, 1024)})
	if err != nil {
		return err
	}
	defer m.Close()
	b := m.Backend()
	fmt.Fprintf(stdout, "backend: %s\n", b.Info().Adapter)
	for _, d := range b.Info().Details {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	toks := make([]int32, *prompt)
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	run := func(label string, profiled bool) error {
		b.SetProfiling(profiled)
		start := time.Now()
		if *prompt > 0 {
			if err := m.Forward(toks, 0); err != nil {
				return err
			}
		}
		pp := time.Since(start)
		ppProf := b.TakeProfile()
		start = time.Now()
		tok := []int32{toks[len(toks)-1]}
		for i := 0; i < *gen; i++ {
			if err := m.Forward(tok, *prompt+i); err != nil {
				return err
			}
			tok[0] = argmaxOf(m.Logits())
		}
		tg := time.Since(start)
		tgProf := b.TakeProfile()
		fmt.Fprintf(stdout, "%s: pp%d %.1f tok/s, tg%d %.1f tok/s\n", label, *prompt, float64(*prompt)/pp.Seconds(), *gen, float64(*gen)/tg.Seconds())
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
	if err := run("plain", false); err != nil {
		return err
	}
	return run("profiled", true)
}

func argmaxOf(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}
