//go:build !amd64 && !arm64

package quant

func applyFeatures(Features) error { return nil }

func simdName() string { return "portable" }
