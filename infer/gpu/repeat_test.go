package gpu

import (
	"errors"
	"testing"

	"github.com/bonsai-chat/bonsai/infer"
)

func TestParseRepeat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]int
		bad  bool
	}{
		{"", nil, false},
		{"attn_lat=2", map[string]int{"attn_lat": 2}, false},
		{"q1_xq=3, rmsnorm=1", map[string]int{"q1_xq": 3, "rmsnorm": 1}, false},
		{"attn_lat", nil, true},
		{"attn_lat=0", nil, true},
		{"attn_lat=65", nil, true},
		{"no_such_kernel=2", nil, true},
		{"qk_norm_rope=2", nil, true}, // a fragment, not a kernel
		{"attn_lat=x", nil, true},
	} {
		got, err := parseRepeat(c.in)
		if c.bad {
			if !errors.Is(err, ErrBadOption) {
				t.Errorf("%q: err %v, want ErrBadOption", c.in, err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%q: %s=%d, want %d", c.in, k, got[k], v)
			}
		}
	}
}

// TestRepeatEncodesCopies checks that Repeat multiplies a kernel's
// dispatches and that the census counts each once.
func TestRepeatEncodesCopies(t *testing.T) {
	b := newTestBackendWith(t, infer.GPUOptions{Repeat: "elementwise=3"})
	x, y := b.mustTensor(t, "x", 1, 64), b.mustTensor(t, "y", 1, 64)
	b.Begin(batchOf(1, 0))
	b.Add(y, y, x)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	c := b.LastCensus()
	if b.LastDispatches() != 3 || len(c) != 1 || c["elementwise"] != 1 {
		t.Errorf("Add with elementwise=3: %d dispatches, census %v; want 3 and elementwise 1", b.LastDispatches(), c)
	}
}
