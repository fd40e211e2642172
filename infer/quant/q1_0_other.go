//go:build !arm64

package quant

func dotQ1_0(n int, w, x []byte) float32 { return dotQ1_0Go(n, w, x) }
