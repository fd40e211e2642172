//go:build !linux

package quant

func allowedCPUs() []int { return nil }
