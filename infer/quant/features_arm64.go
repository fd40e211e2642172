package quant

import "golang.org/x/sys/cpu"

// haveNEON: Advanced SIMD is part of every arm64 CPU; haveSDOT adds the
// dot-product extension (SDOT, ARMv8.2's FEAT_DotProd, every Apple M-series
// core). SetFeatures(FeaturesPortable) turns both off.
var (
	haveNEON = true
	haveSDOT = cpu.ARM64.HasASIMDDP
)

func applyFeatures(f Features) error {
	haveNEON = f != FeaturesPortable
	haveSDOT = cpu.ARM64.HasASIMDDP && haveNEON
	return nil
}

func simdName() string {
	switch {
	case haveSDOT:
		return "neon-dotprod"
	case haveNEON:
		return "neon"
	}
	return "generic"
}
