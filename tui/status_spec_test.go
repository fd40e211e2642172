package tui

import (
	"slices"
	"testing"

	"github.com/bonsai-chat/bonsai/infer/engine"
)

// The status line shows speculation's acceptance once something was
// drafted, and nothing about it before.
func TestStatusShowsSpeculation(t *testing.T) {
	s := statusLine{hasStats: true, stats: engine.Stats{DecodeTokens: 10, DecodeTPS: 5, Drafted: 8, Accepted: 6}}
	if got := s.segments(); !slices.Contains(got, "spec 6/8 75%") {
		t.Errorf("segments %q lack the speculation counts", got)
	}
	s.stats.Drafted, s.stats.Accepted = 0, 0
	for _, seg := range s.segments() {
		if len(seg) >= 4 && seg[:4] == "spec" {
			t.Errorf("segment %q without speculation", seg)
		}
	}
}
