package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/chat"
)

func init() {
	register(command{
		name:    "info",
		summary: "describe a model file: architecture, variant, shapes, tensor types, memory",
		run:     runInfo,
	})
}

func runInfo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ctx := fs.Int("ctx", 0, "context size for the memory estimate (0: the configured context_size, else the chat's default: 4096, capped by the model's trained context)")
	// The model is the configuration's, as the chat's, unless one is named.
	cfgFlags := config.RegisterSettings(fs, "model", "cache-type-k", "cache-type-v")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai info [--ctx N] [MODEL]")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: info takes one MODEL", errUsage)
	}
	if *ctx < 0 {
		return fmt.Errorf("%w: --ctx %d must not be negative", errUsage, *ctx)
	}
	cfg, err := loadConfig(cfgFlags, stderr)
	if err != nil {
		return err
	}
	kvTypes, err := cfg.KVTypes()
	if err != nil {
		return err
	}
	name := cfg.Model
	if len(pos) == 1 {
		name = pos[0]
	}
	if *ctx == 0 {
		*ctx = cfg.ContextSize
	}
	f, err := openModel(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return describe(f, *ctx, kvTypes, stdout)
}

func describe(f *gguf.File, ctx int, kvTypes infer.KVTypes, out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{k}, a...)...) }

	fileBytes := int64(len(f.Bytes()))
	path := f.Path
	if path == "" {
		path = "(embedded)"
	}
	row("file", "%s (%s, GGUF v%d, %d tensors)", path, humanBytes(fileBytes), f.Version, len(f.Tensors))
	if n, ok := f.KV.String("general.name"); ok {
		row("name", "%s", n)
	}
	arch, err := infer.ArchOf(f)
	if err != nil {
		w.Flush()
		return err
	}
	row("architecture", "%s", arch)
	row("variant", "%s", infer.DetectVariant(f).Name)
	row("parameters", "%s", humanCount(infer.Params(f)))
	row("template", "%s", templateRow(chat.FromGGUF(f.KV)))

	var hp infer.Hyperparams
	a, archErr := infer.LookupArch(arch)
	if archErr == nil {
		hp, archErr = a.Hyperparams(f)
	}
	if archErr == nil {
		output := "separate output"
		if hp.TiedOutput {
			output = "tied output (token_embd)"
		}
		row("shape", "%d layers, hidden %d, heads %d / kv %d, head_dim %d, ffn %d, vocab %d, %s",
			hp.Layers, hp.Embed, hp.Heads, hp.KVHeads, hp.HeadDim, hp.FFN, hp.Vocab, output)
		rope := fmt.Sprintf("%s, theta %g", hp.Rope.Mode, hp.Rope.Base)
		if _, ok := f.Tensor("rope_freqs.weight"); ok {
			rope += ", frequency factors (rope_freqs)"
		}
		if hp.Rope.ExtFactor != 0 {
			rope += fmt.Sprintf(", YaRN ×%g over %d", 1/hp.Rope.FreqScale, hp.Rope.OrigContext)
		} else if hp.Rope.FreqScale != 1 {
			rope += fmt.Sprintf(", linear ×%g", 1/hp.Rope.FreqScale)
		}
		row("context", "%d trained; RoPE %s; rms eps %g", hp.ContextTrain, rope, hp.RMSEps)
	} else {
		row("shape", "unavailable: %v", archErr)
	}

	if spec, err := infer.ReadHadamard(f); err != nil {
		row("rotation", "refused: %v", err)
	} else if spec != nil {
		rotated, regrouped := spec.Weights()
		signs := "explicit signs"
		if !spec.HasSigns() {
			signs = "no signs"
		}
		row("rotation", "Hadamard (prism.hadamard), blocks of %d, %s, input widths %v: %d weights rotated (%d regrouped), %d table(s) rotated back",
			spec.Block, signs, spec.Widths(), rotated, regrouped, spec.Tables())
	}

	type typeUse struct {
		t     gguf.Type
		count int
		bytes int64
	}
	uses := map[gguf.Type]*typeUse{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		u := uses[t.Type]
		if u == nil {
			u = &typeUse{t: t.Type}
			uses[t.Type] = u
		}
		u.count++
		u.bytes += t.Size
	}
	list := make([]*typeUse, 0, len(uses))
	for _, u := range uses {
		list = append(list, u)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].bytes > list[j].bytes })
	for i, u := range list {
		k := ""
		if i == 0 {
			k = "tensor types"
		}
		row(k, "%-9s %4d tensors  %10s", u.t, u.count, humanBytes(u.bytes))
	}

	if archErr == nil {
		// In float64: an absurd --ctx reports an absurd size, never a
		// wrapped-around negative one.
		ctx = infer.ContextFor(ctx, hp)
		kv, rs := infer.StateSpecs(f, hp, 1)
		kv.KVTypes = kvTypes
		mem := infer.EstimateMemory(f, hp, 1, 0, kvTypes)
		weights, kvBytes := float64(infer.WeightBytes(f)), float64(kv.Bytes())*float64(ctx)
		state := ""
		if mem.Recurrent > 0 {
			state = fmt.Sprintf(" + %s recurrent state (%d layers) + %s for up to %d snapshots at turn boundaries",
				humanBytes(mem.Recurrent), rs.Layers, humanBytes(mem.SnapshotsMax), mem.SnapshotsMax/mem.Recurrent)
		}
		row("memory", "%s weights (mapped) + %s KV cache for %d tokens (%s per token, %s)%s = %s",
			infer.FormatBytes(weights), infer.FormatBytes(kvBytes), ctx, humanBytes(kv.Bytes()), kvTypes, state,
			infer.FormatBytes(weights+kvBytes+float64(mem.Recurrent+mem.SnapshotsMax)))
		if ctx > hp.ContextTrain {
			row("", "a context of %d is beyond the %d the model was trained on: it loads, but replies past %d tokens may degrade", ctx, hp.ContextTrain, hp.ContextTrain)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if archErr != nil {
		return archErr
	}
	return nil
}

// templateRow says which chat template the chat renders the file with:
// a built-in one, the file's own through the Jinja engine, or, where that
// fails, the built-in ChatML and why.
func templateRow(t *chat.Template) string {
	switch {
	case t.JinjaErr != nil:
		return fmt.Sprintf("%s (the file's own cannot be rendered: %v)", t.Kind, t.JinjaErr)
	case t.Kind == chat.KindJinja:
		return "the file's own (tokenizer.chat_template, rendered by the Jinja engine)"
	case t.Source == "":
		return fmt.Sprintf("%s (built in: the file has none)", t.Kind)
	}
	return fmt.Sprintf("%s (built in, recognised from the file's)", t.Kind)
}

func humanBytes(n int64) string { return infer.FormatBytes(float64(n)) }

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f K", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
