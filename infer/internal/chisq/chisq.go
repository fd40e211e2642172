// Package chisq is the χ² goodness-of-fit check the sampling tests use to
// hold a sampler's draws to the distribution it should follow.
package chisq

import "math"

// Bound is the χ² value with df degrees of freedom that a correct sampler
// exceeds with probability about 1e-6 (Wilson–Hilferty: χ²/df is close to
// normal after a cube root; z = 4.75 is the normal's 1e-6 upper tail), so
// a test held to it fails spuriously about once in a million runs.
func Bound(df int) float64 {
	const z = 4.75
	d := float64(df)
	a := 2 / (9 * d)
	return d * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// Pearson is Pearson's statistic of counts (n draws) against probs, cells
// whose expected count is below 5 merged into one, and its degrees of
// freedom.
func Pearson(counts []int, probs []float64, n int) (stat float64, df int) {
	var restObs, restExp float64
	cells := 0
	for i, p := range probs {
		e := p * float64(n)
		if e < 5 {
			restObs += float64(counts[i])
			restExp += e
			continue
		}
		d := float64(counts[i]) - e
		stat += d * d / e
		cells++
	}
	if restExp > 0 {
		d := restObs - restExp
		stat += d * d / max(restExp, 1e-9)
		cells++
	}
	return stat, cells - 1
}
