package spec

import (
	"math"
	"testing"
)

// The gain of a batched pass is above one exactly when the confirmed share
// of the drafts beats n·c/(a + c·n), whatever the fitted cost: for a CPU
// (rows cost much), a GPU (rows nearly free) and the default before any
// fit.
func TestPassCostGain(t *testing.T) {
	for _, c := range []struct {
		name string
		a, c float64 // seconds per pass and per row
	}{{"default", 0, 0}, {"cpu", 0.02, 0.05}, {"gpu", 0.01, 0.0001}} {
		var pc PassCost
		if c.a > 0 {
			for i := range 100 {
				rows := 1 + i%9
				pc.Add(rows, c.a+c.c*float64(rows))
			}
		}
		s := pc.rowShare()
		if c.a > 0 {
			if want := c.c / (c.a + c.c); math.Abs(s-want) > 1e-6 {
				t.Errorf("%s: fitted row share %.6f, want %.6f", c.name, s, want)
			}
		}
		for _, n := range []int{1, 2, 4} {
			threshold := float64(n) * s / (1 - s + s*float64(n))
			for drafted := 1; drafted <= 8; drafted++ {
				for accepted := 0; accepted <= drafted; accepted++ {
					share := float64(accepted) / float64(drafted)
					if math.Abs(share-threshold) < 1e-9 {
						continue
					}
					if g := pc.Gain(n, drafted, accepted); (g > 1) != (share > threshold) {
						t.Errorf("%s: n %d, %d of %d: gain %.4f, threshold %.4f", c.name, n, accepted, drafted, g, threshold)
					}
				}
			}
		}
	}
}

// The controller doubles the length on full acceptance, shrinks it to one
// more than what was accepted, sits out plain passes once the average gain
// falls below one (twice as many each time), and drafts again after them.
func TestControl(t *testing.T) {
	c := NewControl(8)
	steps := []struct {
		drafted, accepted int
		gain              float64
		wantLen           int
	}{
		{2, 2, 1.5, 4},
		{4, 4, 1.6, 8},
		{8, 8, 0, 8}, // not measured: the length still adapts
		{8, 3, 1.2, 4},
		{4, 0, 0.3, 2}, // the average (EMA) still pays
		{2, 0, 0.2, 0}, // now it does not: pause
	}
	for i, s := range steps {
		c.Verified(s.drafted, s.accepted, s.gain)
		if got := c.Len(); got != s.wantLen {
			t.Fatalf("step %d: length %d, want %d", i, got, s.wantLen)
		}
	}
	for i := range minBackoff {
		if c.Len() != 0 {
			t.Fatalf("drafting again after %d of %d plain passes", i, minBackoff)
		}
		c.Plain()
	}
	if c.Len() == 0 {
		t.Fatal("no drafting after the pause")
	}
	// Two passes that do not quite pay: a pause twice as long.
	c.Verified(2, 1, 0.9)
	if c.Len() == 0 {
		t.Fatal("paused after one pass that nearly paid")
	}
	c.Verified(2, 1, 0.9)
	if c.pause != 2*minBackoff {
		t.Fatalf("pause %d, want %d", c.pause, 2*minBackoff)
	}
	// A first pass that lost more than half is a verdict of its own.
	fresh := NewControl(8)
	if fresh.Verified(2, 0, 0.3); fresh.Len() != 0 {
		t.Fatal("drafting on after a first pass that lost more than half")
	}
	if none := NewControl(0); none.Len() != 0 {
		t.Fatal("a controller of no draft drafts")
	}
}

// With the drafts' own time, the gain is the tokens per second of the
// pass and the drafting against plain passes', in the fitted seconds; no
// extra time is Gain, and so is every gain before a pass is measured.
func TestPassCostGainTimed(t *testing.T) {
	const a, c = 0.02, 0.005
	var fitted, none PassCost
	for i := range 100 {
		rows := 1 + i%9
		fitted.Add(rows, a+c*float64(rows))
	}
	for _, k := range []struct {
		n, drafted, accepted int
		extra                float64
	}{
		{1, 4, 4, 0}, {1, 4, 4, 0.01}, {1, 4, 2, 0.05}, {3, 2, 1, 0.002}, {2, 8, 0, 0.1},
	} {
		fn := float64(k.n)
		want := (fn + float64(k.accepted)) / (a + c*(fn+float64(k.drafted)) + k.extra) / (fn / (a + c*fn))
		if g := fitted.GainTimed(k.n, k.drafted, k.accepted, k.extra); math.Abs(g-want) > 1e-9 {
			t.Errorf("%+v: gain %.6f, want %.6f", k, g, want)
		}
		if k.extra == 0 {
			if g, want := fitted.GainTimed(k.n, k.drafted, k.accepted, 0), fitted.Gain(k.n, k.drafted, k.accepted); g != want {
				t.Errorf("%+v: %v without extra time, Gain %v", k, g, want)
			}
		}
		if g, want := none.GainTimed(k.n, k.drafted, k.accepted, k.extra), none.Gain(k.n, k.drafted, k.accepted); g != want {
			t.Errorf("%+v before any pass: %v, Gain %v", k, g, want)
		}
	}
	// Drafting that takes as long as the pass it saves does not pay.
	if g := fitted.GainTimed(1, 4, 4, 1); g >= 1 {
		t.Errorf("a second of drafting for four tokens: gain %.3f", g)
	}
}
