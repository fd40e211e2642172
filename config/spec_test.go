package config

import (
	"testing"

	"github.com/bonsai-chat/bonsai/infer/spec"
)

// TestSpecForMarksTheDefault: only the unset or "auto" mode without a
// draft is the default's prompt lookup, which the engine leaves off on
// the GPU; an explicit ngram is asked for.
func TestSpecForMarksTheDefault(t *testing.T) {
	for _, c := range []struct {
		mode, draft string
		want        spec.Options
	}{
		{"", "", spec.Options{Mode: spec.NGram, Auto: true}},
		{"auto", "", spec.Options{Mode: spec.NGram, Auto: true}},
		{"auto", "d.gguf", spec.Options{Mode: spec.Draft, DraftPath: "d.gguf"}},
		{"ngram", "", spec.Options{Mode: spec.NGram}},
		{"off", "", spec.Options{Mode: spec.Off}},
	} {
		got, err := SpecFor(c.mode, c.draft)
		if err != nil || got != c.want {
			t.Errorf("SpecFor(%q, %q) = %+v, %v; want %+v", c.mode, c.draft, got, err, c.want)
		}
	}
}
