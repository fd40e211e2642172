package spec

import "testing"

// Prompt lookup runs where it was asked for, and by default anywhere but
// the GPU.
func TestLookupOn(t *testing.T) {
	for _, c := range []struct {
		o       Options
		backend string
		want    bool
	}{
		{Options{Mode: NGram}, "cpu", true},
		{Options{Mode: NGram}, "gpu", true},
		{Options{Mode: NGram, Auto: true}, "cpu", true},
		{Options{Mode: NGram, Auto: true}, "gpu", false},
		{Options{Mode: Off}, "cpu", false},
		{Options{Mode: Draft, DraftPath: "d.gguf"}, "cpu", false},
	} {
		if got := c.o.LookupOn(c.backend); got != c.want {
			t.Errorf("%+v on %s: %v, want %v", c.o, c.backend, got, c.want)
		}
	}
}
