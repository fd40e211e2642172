package main

import (
	"flag"
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/quant"
)

// cpuFeaturesFlag declares --cpu-features: a cap on the CPU kernels'
// instruction sets, to measure what a CPU without AVX-512 (or one bonsai
// has no assembly for) gets.
func cpuFeaturesFlag(fs *flag.FlagSet) *string {
	return fs.String("cpu-features", "all", "CPU kernels: all (the best this CPU has), avx2 (AVX-512 off) or portable (pure Go)")
}

// setCPUFeatures applies --cpu-features; call it before loading a model.
func setCPUFeatures(cmd, name string) error {
	features, err := quant.ParseFeatures(name)
	if err != nil {
		return fmt.Errorf("%w: %s: --cpu-features: %w", errUsage, cmd, err)
	}
	if err := quant.SetFeatures(features); err != nil {
		return fmt.Errorf("%s: --cpu-features %s: %w", cmd, name, err)
	}
	return nil
}
