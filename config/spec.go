package config

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/infer/spec"
)

// SpecOptions turns the spec and draft settings into the engine's
// speculation: "auto" is the draft model when one is set, else prompt
// lookup (bonsai ships no draft for its default model), which the engine
// leaves off on the GPU backend (spec.Options.Auto).
func (c Config) SpecOptions() (spec.Options, error) {
	return SpecFor(c.Spec, c.Draft)
}

// SpecFor is SpecOptions for a mode and draft path given apart (`bonsai
// run`'s flags).
func SpecFor(mode, draft string) (spec.Options, error) {
	if mode == "" || mode == "auto" {
		if draft != "" {
			return spec.Options{Mode: spec.Draft, DraftPath: draft}, nil
		}
		return spec.Options{Mode: spec.NGram, Auto: true}, nil
	}
	m, err := spec.ParseMode(mode)
	if err != nil {
		return spec.Options{}, err
	}
	if m == spec.Draft && draft == "" {
		return spec.Options{}, fmt.Errorf("%w: %w", ErrInvalid, spec.ErrNoDraft)
	}
	return spec.Options{Mode: m, DraftPath: draft}, nil
}
