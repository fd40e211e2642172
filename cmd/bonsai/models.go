package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/defaultmodel"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

func init() {
	register(command{
		name:    "models",
		summary: "list downloaded models and the ones available to pull",
		run:     runModels,
	})
}

func runModels(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", hub.DefaultDir(), "models directory")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bonsai models [--dir DIR]")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: models takes no arguments", errUsage)
	}
	local, err := hub.List(*dir)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if len(local) == 0 {
		fmt.Fprintf(stdout, "no models in %s yet\n", *dir)
	} else {
		fmt.Fprintf(stdout, "models in %s:\n", *dir)
		fmt.Fprintln(tw, "NAME\tVARIANT\tWEIGHTS\tSIZE\tPATH")
		for _, l := range local {
			name := "-"
			if l.Model != nil {
				name = l.Model.Name
				have[name] = !l.Partial
			}
			variant, weights := modelsDescribe(l)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, variant, weights, pullFormatBytes(l.Size), l.Path)
		}
		tw.Flush()
	}
	fmt.Fprintf(stdout, "\nbuilt in (what bonsai runs when no model is set; --model %s):\n", defaultmodel.Name)
	fmt.Fprintf(tw, "  %s\t%s\ta toy 1-bit Qwen3 trained on the King James Bible and the Dhammapada, to try bonsai offline; it knows little else\n",
		defaultmodel.Name, pullFormatBytes(int64(len(defaultmodel.GGUF))))
	tw.Flush()
	fmt.Fprintln(stdout, "\navailable to pull (bonsai pull NAME; a download is refused unless it passes the check shown):")
	for _, m := range hub.Registry {
		if have[m.Name] {
			continue
		}
		size := "size unknown"
		if m.Size > 0 {
			size = pullFormatBytes(m.Size)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", m.Name, size, m.Check(), m.Summary, unrunnableMark(m.Arch(), m.Types()))
	}
	return tw.Flush()
}

// unrunnableMark flags a model this build cannot run: an architecture it
// has no forward pass for, or tensor types it has no kernels for. It
// derives from the architecture registry and the quant package's table of
// types, so the mark goes away by itself once both are there.
func unrunnableMark(arch string, types []gguf.Type) string {
	if arch == "" {
		return ""
	}
	if _, err := infer.LookupArch(arch); err != nil {
		return " [bonsai cannot run " + arch + " models yet]"
	}
	var missing []string
	for _, t := range types {
		if !quant.Supported(t) {
			missing = append(missing, strings.ToLower(t.String()))
		}
	}
	if len(missing) > 0 {
		return " [bonsai cannot run " + strings.Join(missing, ", ") + " weights yet]"
	}
	return ""
}

// fileTypes lists the tensor types f holds.
func fileTypes(f *gguf.File) []gguf.Type {
	seen := map[gguf.Type]bool{}
	var types []gguf.Type
	for i := range f.Tensors {
		if t := f.Tensors[i].Type; !seen[t] {
			seen[t] = true
			types = append(types, t)
		}
	}
	return types
}

// modelsDescribe reads a local file's header for its variant and weight types.
func modelsDescribe(l hub.Local) (variant, weights string) {
	if l.Partial {
		if l.Model != nil && l.Model.Size > 0 {
			return fmt.Sprintf("incomplete download (%.0f%%)", 100*float64(l.Size)/float64(l.Model.Size)), "-"
		}
		return "incomplete download", "-"
	}
	f, err := gguf.Open(l.Path)
	if err != nil {
		return "unreadable: " + modelsShortError(err), "-"
	}
	defer f.Close()
	v := infer.DetectVariant(f)
	arch, _ := infer.ArchOf(f)
	return v.Name + unrunnableMark(arch, fileTypes(f)), modelsTypeCounts(infer.WeightTypes(f))
}

// modelsTypeCounts renders tensor type counts, most common first: "q1_0×254".
func modelsTypeCounts(counts map[gguf.Type]int) string {
	if len(counts) == 0 {
		return "-"
	}
	types := make([]gguf.Type, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if counts[types[i]] != counts[types[j]] {
			return counts[types[i]] > counts[types[j]]
		}
		return types[i] < types[j]
	})
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s×%d", t, counts[t])
	}
	return strings.Join(parts, " ")
}

func modelsShortError(err error) string {
	s := err.Error()
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
