package main

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// resolveSpec is config.SpecFor with the draft model looked up as --model
// is (a path, a registry name or a file in the models directory).
func resolveSpec(mode, draft string) (spec.Options, error) {
	if draft != "" {
		path, err := hub.Resolve(draft, hub.DefaultDir())
		if err != nil {
			return spec.Options{}, fmt.Errorf("draft model: %w", err)
		}
		draft = path
	}
	o, err := config.SpecFor(mode, draft)
	if err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// specLine is the speculation part of --format jsonl's final object.
type specLine struct {
	Mode       string  `json:"mode"`
	Drafted    int     `json:"drafted"`
	Accepted   int     `json:"accepted"`
	Verifies   int     `json:"verify_passes"`
	AcceptRate float64 `json:"accept_rate"`
}
