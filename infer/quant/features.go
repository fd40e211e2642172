package quant

import (
	"errors"
	"fmt"
	"strings"
)

// Features caps the instruction sets the kernels may use. The default,
// FeaturesAll, is everything the CPU reports; the lower levels exist to
// measure (and test) what a CPU without those extensions gets, on this one.
type Features uint8

const (
	// FeaturesAll: every extension the CPU has (AVX-512 VNNI, AVX2, NEON
	// with or without the dot-product instructions).
	FeaturesAll Features = iota
	// FeaturesAVX2: on x86, the AVX2+FMA kernels with AVX-512 turned off,
	// as on most consumer Intel CPUs; elsewhere the same as FeaturesAll.
	FeaturesAVX2
	// FeaturesPortable: the pure-Go kernels only, what a CPU bonsai has no
	// assembly for runs.
	FeaturesPortable
)

// ErrFeatures: the CPU lacks the instruction sets a Features value asks for.
var ErrFeatures = errors.New("quant: CPU features unavailable")

// ParseFeatures reads a feature level's name: "all" (or "auto", ""),
// "avx2", "portable".
func ParseFeatures(s string) (Features, error) {
	switch strings.ToLower(s) {
	case "", "all", "auto", "native":
		return FeaturesAll, nil
	case "avx2":
		return FeaturesAVX2, nil
	case "portable", "generic", "none":
		return FeaturesPortable, nil
	}
	return 0, fmt.Errorf("%w: %q: want all, avx2 or portable", ErrFeatures, s)
}

func (f Features) String() string {
	switch f {
	case FeaturesAll:
		return "all"
	case FeaturesAVX2:
		return "avx2"
	case FeaturesPortable:
		return "portable"
	}
	return fmt.Sprintf("Features(%d)", uint8(f))
}

// SetFeatures selects the kernels for the Matrices created after it (a
// Matrix keeps the kernel it was created with). It is not safe to call
// while other goroutines create matrices or run kernels: call it once at
// start-up, before loading a model.
func SetFeatures(f Features) error {
	if f > FeaturesPortable {
		return fmt.Errorf("%w: %v", ErrFeatures, f)
	}
	return applyFeatures(f)
}

// SIMD names the kernel family that new matrices get under the current
// features: "avx512-vnni", "avx2", "neon-dotprod", "neon" or "generic" (the portable kernels).
func SIMD() string { return simdName() }
