package quant

import "math"

// GlibcExpf and GlibcLogf are glibc's expf and logf as they run on x86-64
// with FMA (the variants its ifunc picks there), which ggml's scalar
// unary ops and the tails of its vectorised ones call: llama.cpp's CPU
// results are those of these functions, and glibc's are not the correctly
// rounded values (expf is off by up to 0.502 ulp, logf too in places), so
// the f64 result rounded to f32 differs from them now and then, and the
// networks amplify a flipped ulp. Both evaluate in f64 from a small table
// (2^(i/32) for expf; 1/c and log c at 16 points for logf) and a cubic,
// then round once to f32; the table and coefficients are glibc's.

// expfTab holds the bits of 2^(i/32), less i << 47 (added back with k).
var expfTab = [32]uint64{
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
	0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
	0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
	0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
	0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
	0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
}

const (
	expfInvLn2N = 0x1.71547652b82fep+5 // 32/ln 2
	expfShift   = 0x1.8p+52            // adding it rounds to an integer
	expfC0      = 0x1.c6af84b912394p-20
	expfC1      = 0x1.ebfce50fac4f3p-13
	expfC2      = 0x1.62e42ff0c52d6p-6
)

// GlibcExpf is glibc's expf: e^x = 2^(k/32)·2^(r/32), k = round(32x/ln 2),
// 2^(r/32) by a cubic in r; +Inf above ln(MaxFloat32), 0 below the
// smallest subnormal's log, NaN for NaN, as glibc.
func GlibcExpf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 0x1.62e42ep6:
		return float32(math.Inf(1))
	case x < -0x1.9fe368p6:
		return 0
	}
	xd := float64(x)
	kd := math.FMA(expfInvLn2N, xd, expfShift)
	ki := math.Float64bits(kd)
	kd -= expfShift
	r := math.FMA(expfInvLn2N, xd, -kd)
	s := math.Float64frombits(expfTab[ki%32] + ki<<47)
	z := math.FMA(expfC0, r, expfC1)
	y := math.FMA(expfC2, r, 1)
	y = math.FMA(z, r*r, y)
	return float32(y * s)
}

// logfTab holds 1/c and log c for the 16 subintervals of [0x3f330000,
// 2·0x3f330000) in bits that logf reduces its argument to.
var logfTab = [16][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2}, {0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010b0p+0, -0x1.01eae7f513a67p-2}, {0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3}, {0x1.25e227b0b8ea0p+0, -0x1.1aa2bc79c8100p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4}, {0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5}, {0x1p+0, 0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5}, {0x1.ca4b31f026aa0p-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3}, {0x1.9c2d163a1aa2dp-1, 0x1.bc2860d224770p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2}, {0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
}

const (
	logfLn2 = 0x1.62e42fefa39efp-1
	logfA0  = -0x1.00ea348b88334p-2
	logfA1  = 0x1.5575b0be00b6ap-2
	logfA2  = -0x1.ffffef20a4123p-2
)

// GlibcLogf is glibc's logf: x = 2^k·z, log x = log c + k·ln 2 + log1p(z/c − 1)
// with c the table's point nearest z and log1p by a cubic. For zero,
// negative, subnormal and non-finite x (glibc's special paths) it returns
// the f64 result rounded.
func GlibcLogf(x float32) float32 {
	ix := math.Float32bits(x)
	if ix == 0x3f800000 {
		return 0
	}
	if ix-0x00800000 >= 0x7f800000-0x00800000 {
		return float32(math.Log(float64(x)))
	}
	tmp := ix - 0x3f330000
	c := logfTab[(tmp>>19)%16]
	k := int32(tmp) >> 23
	z := float64(math.Float32frombits(ix - tmp&0xff800000))
	r := math.FMA(z, c[0], -1)
	y0 := math.FMA(float64(k), logfLn2, c[1])
	r2 := r * r
	y := math.FMA(logfA1, r, logfA2)
	y = math.FMA(logfA0, r2, y)
	y = math.FMA(y, r2, y0+r)
	return float32(y)
}
