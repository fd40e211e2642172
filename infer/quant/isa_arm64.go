package quant

import "github.com/bonsai-chat/bonsai/gguf"

// isaKernels is one weight type's arm64 kernels: with the dot-product
// extension (SDOT) and without it. They read the file's rows; blockSums
// and rowDot (neon_arm64.go) reach each type's assembly.
type isaKernels struct{ sdot, neon cpuKernel }

// neonSums is the NEON kernels of a type with integer sums in blockSums.
var neonSums = isaKernels{sdot: cpuKernel{product: neonProductSdot}, neon: cpuKernel{product: neonProductNeon}}

// isaTable is the arm64 row of each type that has assembly here. A type missing
// here runs the portable dot product.
var isaTable = map[gguf.Type]isaKernels{
	gguf.Q8_0: neonSums,
	gguf.Q4_0: neonSums,
	gguf.Q2_0: neonSums,
	gguf.Q4_K: neonSums,
	gguf.Q5_K: neonSums,
	gguf.Q6_K: neonSums,
}

func (k isaKernels) choose() cpuKernel {
	switch {
	case haveSDOT:
		return k.sdot
	case haveNEON:
		return k.neon
	}
	return cpuKernel{}
}
