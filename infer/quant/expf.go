package quant

import "math"

// ExpF is ggml's vectorised single-precision exp (ggml_v_expf, which
// llama.cpp's x86 build uses in softmax and SiLU), computed lane by lane:
// e^x = 2^n · p(b) with n = round(x·log2 e) and b = x − n·ln 2 in two parts,
// p a degree-5 polynomial. It differs from the correctly rounded exp by an
// ulp or two, and matching it keeps attention weights and the FFN on the
// same side of every later f16 and 8-bit rounding as llama.cpp.
func ExpF(x float32) float32 {
	const (
		shifter = 0x1.8p23 // adding it rounds to an integer
		log2e   = 0x1.715476p+0
		ln2hi   = 0x1.62e4p-1
		ln2lo   = 0x1.7f7d1cp-20
	)
	z := fma32(x, log2e, shifter)
	n := z - shifter
	b := fma32(-n, ln2lo, fma32(-n, ln2hi, x))
	if abs32(n) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	u := b * b
	j := fma32(
		fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)),
		u,
		fma32(0x1.ffffecp-1, b, 1))
	if n >= -126 && n <= 127 {
		// 2^n as an f32 exponent: exact, like scalef for a normal result.
		return j * math.Float32frombits(uint32(int32(n)+127)<<23)
	}
	return float32(math.Ldexp(float64(j), int(n)))
}

// SiLU is x·sigmoid(x) as ggml_v_silu computes it.
func SiLU(x float32) float32 { return x / (1 + ExpF(-x)) }

// FMA32 is a·b+c with one rounding to f32, as the FMA instructions that
// ggml's x86 build is compiled to (-mfma, GCC's default -ffp-contract=fast)
// compute it. The product is exact in f64 and the sum's rounding error is
// recovered exactly (TwoSum), so the double rounding f64 → f32 is corrected
// where it matters: when the f64 sum lands exactly halfway between two f32s.
func FMA32(a, b, c float32) float32 {
	// Fast path: one f64 FMA (an instruction on amd64). Rounding its result
	// to f32 is the single rounding of the exact value unless it landed on
	// an f32 midpoint (checked for normal results; the rest go the long way).
	if f := math.FMA(float64(a), float64(b), float64(c)); math.Abs(f) >= 0x1p-126 && !halfwayF32(f) {
		return float32(f)
	}
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	bp := s - q
	err := (p - bp) + (q - (s - bp)) // s + err = p + q exactly
	r := float32(s)
	if err == 0 || !halfwayF32(s) {
		return r
	}
	// s is a tie for f32 but the exact sum lies to one side of it.
	lo, hi := float32(s), float32(s)
	if float64(r) > s {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	} else {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	}
	if err > 0 {
		return hi
	}
	return lo
}

// halfwayF32 reports whether the f64 x lies exactly halfway between two
// neighbouring f32 values (normal range).
func halfwayF32(x float64) bool {
	bits := math.Float64bits(x)
	return bits&(1<<29-1) == 1<<28
}

// fma32 is FMA32 for this package's kernels.
func fma32(a, b, c float32) float32 { return FMA32(a, b, c) }
