//go:build !amd64

package quant

func dotQ8_0SIMD(x, y []byte) (float32, bool) { return 0, false }
