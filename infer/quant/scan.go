package quant

// Scans for the samplers: a logit above the current cut is rare after the
// first few thousand of a vocabulary, so the scan is a comparison pass at
// memory speed (sixteen per instruction on AVX-512) rather than a loop
// that branches on every logit.

// FirstAbove is the index of the first x[i] > thr with i ≥ from (a NaN is
// never above), or len(x).
func FirstAbove(x []float32, from int, thr float32) int {
	from = min(max(from, 0), len(x))
	j, done := firstAboveSIMD(x[from:], thr, false)
	if j < done {
		return from + j
	}
	for i := from + done; i < len(x); i++ {
		if x[i] > thr {
			return i
		}
	}
	return len(x)
}

// FirstNotAtMost is the index of the first x[i] with i ≥ from that is not
// ≤ thr (a NaN counts), or len(x): the complement of a loop that skips
// while x[i] <= thr.
func FirstNotAtMost(x []float32, from int, thr float32) int {
	from = min(max(from, 0), len(x))
	j, done := firstAboveSIMD(x[from:], thr, true)
	if j < done {
		return from + j
	}
	for i := from + done; i < len(x); i++ {
		if !(x[i] <= thr) {
			return i
		}
	}
	return len(x)
}
