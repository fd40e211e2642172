package gpu_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/internal/tinymodel"
	"github.com/bonsai-chat/bonsai/infer/profile"
)

// TestProfilingSamplesDecoding checks that profiling times every prompt
// pass and one decoding step in every few (the others run untimed, as with
// profiling off), that the timed steps are counted as the sample's tokens,
// and that timed and untimed steps compute the same logits.
func TestProfilingSamplesDecoding(t *testing.T) {
	cfg := tinymodel.Small(gguf.Q1_0)
	cfg.Layers = 1
	plain := loadOn(t, "gpu", cfg)
	timed := loadOn(t, "gpu", cfg)
	timed.Backend().SetProfiling(true)
	prompt := []int32{1, 5, 9, 13, 17}
	for _, m := range []interface{ Forward([]int32, int) error }{plain, timed} {
		if err := m.Forward(prompt, 0); err != nil {
			t.Fatal(err)
		}
	}
	s := timed.Backend().TakeProfile()
	var every int
	timing := strings.HasPrefix(s.Source, "gpu timestamps")
	if _, err := fmt.Sscanf(s.Source, "gpu timestamps (1 decoding step in %d,", &every); timing && (err != nil || every < 2) {
		t.Fatalf("source %q: no sampling rate", s.Source)
	}
	if !timing {
		t.Logf("adapter without timestamps (%s): only the logits are checked", s.Source)
	} else if s.Tokens != len(prompt) || s.Total() <= 0 {
		t.Fatalf("prompt pass: %d tokens timed (want %d), %v in all", s.Tokens, len(prompt), s.Total())
	}
	steps := 2*every + 1
	for i := 0; i < steps; i++ {
		tok := int32(20 + i)
		if err := plain.Forward([]int32{tok}, len(prompt)+i); err != nil {
			t.Fatal(err)
		}
		if err := timed.Forward([]int32{tok}, len(prompt)+i); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plain.Logits(), timed.Logits()) {
			t.Fatalf("step %d: logits differ with profiling on", i)
		}
	}
	s = timed.Backend().TakeProfile()
	if !timing {
		return
	}
	if want := (steps + every - 1) / every; s.Tokens != want {
		t.Errorf("%d decoding steps: %d timed, want %d", steps, s.Tokens, want)
	}
	if s.PerToken(profile.FFN) <= 0 {
		t.Errorf("timed steps recorded no FFN time: %+v", s)
	}
}
