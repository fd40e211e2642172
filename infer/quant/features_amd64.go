package quant

import (
	"fmt"

	"golang.org/x/sys/cpu"
)

// The kernel selectors below start at everything the CPU has; SetFeatures
// lowers them.
var (
	// haveVNNI: the AVX-512 kernels need F, BW (byte masks) and VNNI
	// (VPDPBUSD).
	haveVNNI = cpuVNNI
	// haveAVX2: the kernels for CPUs without AVX-512 (most desktop x86)
	// need AVX2 and FMA.
	haveAVX2   = cpuAVX2
	haveAVX512 = cpu.X86.HasAVX512F
	// haveF16C: the AVX2 f16 kernels convert with VCVTPH2PS.
	haveF16C = cpu.X86.HasF16C
)

var (
	cpuVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI
	cpuAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

func applyFeatures(f Features) error {
	if f == FeaturesAVX2 && !cpuAVX2 {
		return fmt.Errorf("%w: this CPU has no AVX2 and FMA", ErrFeatures)
	}
	haveVNNI = cpuVNNI && f == FeaturesAll
	haveAVX512 = cpu.X86.HasAVX512F && f == FeaturesAll
	haveAVX2 = cpuAVX2 && f != FeaturesPortable
	return nil
}

func simdName() string {
	switch {
	case haveVNNI:
		return "avx512-vnni"
	case haveAVX2:
		return "avx2"
	}
	return "generic"
}
