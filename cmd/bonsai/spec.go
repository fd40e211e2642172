package main

import (
	"flag"
	"fmt"

	"github.com/bonsai-chat/bonsai/config"
	"github.com/bonsai-chat/bonsai/infer/hub"
	"github.com/bonsai-chat/bonsai/infer/spec"
)

// specFlags are `bonsai run`'s speculative decoding flags (the chat has
// them through config.RegisterFlags).
type specFlags struct {
	mode, draft string
	maxDraft    int
}

func addSpecFlags(fs *flag.FlagSet) *specFlags {
	s := &specFlags{}
	fs.StringVar(&s.mode, "spec", "auto", "speculative decoding: auto (draft if --draft, else ngram), ngram (prompt lookup), draft or off")
	fs.StringVar(&s.draft, "draft", "", "draft `model` for speculative decoding: a smaller model with the same vocabulary (path or registry name)")
	fs.IntVar(&s.maxDraft, "max-draft", 0, fmt.Sprintf("most tokens drafted per verify pass (0: %d, adapted as it goes)", spec.DefaultMaxDraft))
	return s
}

// options resolves the flags into the engine's speculation.
func (s *specFlags) options() (spec.Options, error) {
	if s.maxDraft < 0 {
		return spec.Options{}, fmt.Errorf("%w: --max-draft must not be negative", errUsage)
	}
	o, err := resolveSpec(s.mode, s.draft)
	o.MaxDraft = s.maxDraft
	return o, err
}

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
