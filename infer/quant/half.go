package quant

import "math"

// F16ToF32 widens an IEEE 754 binary16 value. Every half is exactly
// representable as a float32, so this is exact.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or NaN; NaN keeps its payload
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal: rebias 15 → 127
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	default: // subnormal half: mant·2⁻²⁴, a normal float32
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
}

// F32ToF16 narrows to binary16 rounding to nearest, ties to even, as x86's
// F16C (vcvtps2ph with rounding mode 0) does and hence llama.cpp's x86 build.
// Values too large become ±Inf; NaNs stay (quiet) NaNs.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is subnormal (or zero): f = mant24·2^(e−14) half-ulps.
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	// A carry out of the mantissa correctly bumps the exponent (up to Inf).
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// BF16ToF32 widens a bfloat16 value (the top half of a float32); exact.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows to bfloat16 rounding to nearest, ties to even, as ggml's
// ggml_compute_fp32_to_bf16 does; NaNs are forced quiet.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// RoundF16 rounds x to the nearest f16 (ties to even) and back.
func RoundF16(x float32) float32 { return F16ToF32(F32ToF16(x)) }

// F32sToF16 converts src to f16 bits in dst (len(dst) ≥ len(src)).
func F32sToF16(dst []uint16, src []float32) {
	if f32ToF16sSIMD(dst, src) {
		return
	}
	for i, x := range src {
		dst[i] = F32ToF16(x)
	}
}

// RoundF16s sets dst[i] = RoundF16(src[i]) (len(dst) ≥ len(src)).
func RoundF16s(dst, src []float32) {
	if roundF16sSIMD(dst, src) {
		return
	}
	for i, x := range src {
		dst[i] = RoundF16(x)
	}
}
