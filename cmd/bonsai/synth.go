package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/synth"
)

func init() {
	register(command{
		name:    "synth",
		summary: "write a synthetic Qwen3 or Qwen3.5 (Bonsai) GGUF model with random weights",
		run:     runSynth,
	})
}

func runSynth(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", "qwen3", "architecture: qwen3 (Bonsai 1.x), qwen35 (Bonsai 27B, Bonsai 2), qwen2 (Qwen2.5), llama (Llama 2/3.x, TinyLlama, Mistral) or gemma3 (Gemma 3)")
	shapeName := fs.String("shape", "tiny", "model shape: tiny, 1.7b, 4b or 8b (qwen3); tiny or 27b (qwen35); tiny, 0.5b, 1.5b or 7b (qwen2); tiny, 1b, 3b, 8b, tinyllama-1.1b, llama2-7b or mistral-7b (llama); tiny or 1b (gemma3)")
	typeName := fs.String("type", "q1_0", "type of every 2-D weight: q1_0, q2_0, q2_0_g128, pq2_0, ptq1_0, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k, f16, bf16, f32; or q4_k_m, llama-quantize's Q4_K/Q6_K mix")
	seed := fs.Uint64("seed", 1, "random seed (the same seed writes the same file)")
	layers := fs.Int("layers", 0, "number of layers (0: the shape's)")
	window := fs.Int("window", 0, "gemma3's sliding window, attention.sliding_window (0: the shape's)")
	vocab := fs.Int("vocab", 0, "vocabulary size (0: the shape's; smaller keeps the first Qwen (llama: Llama 3) tokens, larger pads)")
	logitStd := fs.Float64("logit-std", synth.DefaultLogitStd, "spread of the logits")
	rotation := fs.String("rotation", "auto", "Hadamard-rotated weights (prism.hadamard.*, Bonsai 2): auto (qwen35 in ptq1_0 or pq2_0), yes or no")
	block := fs.Int("block", 0, "prism.hadamard.block_size of a rotated model (0: Bonsai 2's 1024 where the shape's widths allow it, else the largest power of two dividing them)")
	twin := fs.String("twin", "", "also write the rotated model's unrotated F32 twin here (the same function with the rotation folded in; small shapes only)")
	out := fs.String("o", "", "output GGUF file (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai synth [--arch qwen3|qwen35|qwen2|llama|gemma3] --shape tiny|1.7b|4b|8b|27b|… --type q1_0 [--seed N] [--layers N] [--rotation auto|yes|no] [--block N] [--twin FILE] -o FILE")
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
		return fmt.Errorf("%w: synth: unexpected argument %q", errUsage, pos[0])
	}
	if *out == "" {
		return fmt.Errorf("%w: synth: -o FILE is required", errUsage)
	}
	shape, err := synth.ArchShape(*arch, *shapeName)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	mix, typ, isMix := synth.ParseMix(*typeName)
	if !isMix {
		if typ, err = synth.ParseType(*typeName); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	if *layers < 0 || *vocab < 0 || *window < 0 {
		return fmt.Errorf("%w: synth: --layers, --vocab and --window must not be negative", errUsage)
	}
	if *window > 0 {
		if shape.Window == 0 {
			return fmt.Errorf("%w: synth: --window is gemma3's (the %s shapes have no sliding window)", errUsage, *arch)
		}
		shape.Window = *window
	}
	if *layers > 0 {
		shape.Layers = *layers
	}
	if *vocab > 0 {
		shape.Vocab = *vocab
	}
	var rotate bool
	switch *rotation {
	case "auto":
		// Bonsai 2 is qwen35 in the Prism types; Ternary Bonsai 1.x's
		// PQ2_0 files carry no rotation.
		rotate = shape.Arch == "qwen35" && (typ == gguf.PTQ1_0 || typ == gguf.PQ2_0)
	case "yes", "no":
		rotate = *rotation == "yes"
	default:
		return fmt.Errorf("%w: synth: --rotation %q (want auto, yes or no)", errUsage, *rotation)
	}
	if !rotate && (*twin != "" || *block != 0) {
		return fmt.Errorf("%w: synth: --twin and --block are for rotated models (--rotation yes, or auto with qwen35 in ptq1_0 or pq2_0)", errUsage)
	}
	if rotate {
		// prism.hadamard version 1 rotates token_embd's rows back, so
		// the output is a matrix of its own, as in Bonsai 2.
		shape.Tied = false
	}
	opts := synth.Options{Shape: shape, Type: typ, Mix: mix, Seed: *seed, LogitStd: *logitStd}
	size, err := opts.Size()
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	start := time.Now()
	kind := ""
	if rotate {
		kind = ", Hadamard-rotated"
	}
	fmt.Fprintf(stderr, "writing %s: %s %s %s%s, %d layers, vocab %d, seed %d, ~%.1f MiB\n",
		*out, *arch, shape.Name, typeLabel(typ, mix), kind, shape.Layers, shape.Vocab, *seed, float64(size)/(1<<20))
	if rotate {
		err = synth.WriteRotated(*out, *twin, synth.RotatedOptions{Options: opts, Block: *block})
		if errors.Is(err, synth.ErrRotatedShape) {
			err = fmt.Errorf("%w: %w", errUsage, err)
		}
	} else {
		err = synth.Write(*out, opts)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s (%.1fs)\n", *out, time.Since(start).Seconds())
	if *twin != "" {
		fmt.Fprintf(stdout, "%s (its unrotated F32 twin)\n", *twin)
	}
	return nil
}

// typeLabel names a file's weight type: the mix, where there is one.
func typeLabel(t gguf.Type, m synth.Mix) string {
	if m != synth.MixNone {
		return m.String()
	}
	return t.String()
}
