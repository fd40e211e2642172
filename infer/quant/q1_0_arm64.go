package quant

// q1_0DotNEON is dotQ1_0Go for blocks Q1_0 blocks at w and the Q8_0
// activations at x, in NEON (q1_0_arm64.s).
//
//go:noescape
func q1_0DotNEON(blocks int, w, x *byte) float32

func dotQ1_0(n int, w, x []byte) float32 {
	blocks := n / qk1_0
	if blocks == 0 {
		return 0
	}
	_, _ = w[blocks*q1_0Bytes-1], x[4*blocks*q8_0Bytes-1]
	return q1_0DotNEON(blocks, &w[0], &x[0])
}
