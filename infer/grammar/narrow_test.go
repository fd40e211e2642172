package grammar

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// narrow finds what a scan of the literals finds.
func TestNarrowMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var lits []string
		for range 1 + rng.IntN(40) {
			b := make([]byte, rng.IntN(4))
			for i := range b {
				b[i] = "abc"[rng.IntN(3)]
			}
			lits = append(lits, string(b))
		}
		slices.Sort(lits)
		lits = slices.Compact(lits)
		// Narrow byte by byte along a random literal, as feed does.
		lo, hi := 0, len(lits)
		for pos := 0; lo < hi && pos < 4; pos++ {
			c := "abcd"[rng.IntN(4)]
			slo, shi := lo, hi
			for slo < shi && (len(lits[slo]) <= pos || lits[slo][pos] < c) {
				slo++
			}
			for shi > slo && (len(lits[shi-1]) <= pos || lits[shi-1][pos] > c) {
				shi--
			}
			gotLo, gotHi := narrow(lits, lo, hi, pos, c)
			if slo < shi && (gotLo != slo || gotHi != shi) || slo >= shi && gotLo < gotHi {
				t.Fatalf("%q[%d:%d] at %d, byte %c: narrow %d:%d, a scan %d:%d", lits, lo, hi, pos, c, gotLo, gotHi, slo, shi)
			}
			lo, hi = gotLo, gotHi
		}
	}
}
