package quant

//go:noescape
func dotQ8_0AVX2(x, y *byte, blocks int) float32

// dotQ8_0SIMD is DotQ8_0 by the AVX2 loop it follows, where the CPU has it.
func dotQ8_0SIMD(x, y []byte) (float32, bool) {
	if !haveAVX2 || !haveF16C || len(x) < q8_0Bytes {
		return 0, false
	}
	return dotQ8_0AVX2(&x[0], &y[0], len(x)/q8_0Bytes), true
}
