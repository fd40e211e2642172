package infer

import "math"

// sinf and cosf are glibc's single-precision sine and cosine (the
// ARM-optimized-routines algorithm in sysdeps/ieee754/flt-32, built with
// FMA on x86-64 CPUs that have it), which ggml's CPU RoPE calls through
// libm. They are within an ulp of the true values but not always correctly
// rounded: math.Sin rounded to f32 differs from them on about 2% of RoPE's
// angles, and one ulp of a rotated query or key can push a value over an
// 8-bit or f16 rounding boundary later. Everything is computed in f64 and
// rounded once at the end, as the C code does.

// sincosPoly holds one sign variant of glibc's __sincosf_table.
type sincosPoly struct {
	sign               [4]float64
	hpiInv, hpi        float64
	c0, c1, c2, c3, c4 float64
	s1, s2, s3         float64
}

// sincosTable: the second entry negates the cosine polynomial.
var sincosTable = [2]sincosPoly{
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0,
		0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0,
		-0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// invPio4 is 4/π to 192 bits, 8 new bits per entry.
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

func abstop12(x float32) uint32 { return math.Float32bits(x) >> 20 & 0x7ff }

var (
	top12Pio4 = abstop12(float32(0x1.921FB54442D18p-1))
	top12Tiny = abstop12(0x1p-12)
	top12Fast = abstop12(120)
	top12Inf  = abstop12(float32(math.Inf(1)))
	fma       = math.FMA
	pi63      = 0x1.921FB54442D18p-62
)

// sinfPoly evaluates sin (n even) or cos (n odd) of the reduced x.
func sinfPoly(x, x2 float64, p *sincosPoly, n int) float32 {
	if n&1 == 0 {
		x3 := x * x2
		s1 := fma(x2, p.s3, p.s2)
		x7 := x3 * x2
		s := fma(x3, p.s1, x)
		return float32(fma(x7, s1, s))
	}
	x4 := x2 * x2
	c2 := fma(x2, p.c4, p.c3)
	c1 := fma(x2, p.c1, p.c0)
	x6 := x4 * x2
	c := fma(x4, p.c2, c1)
	return float32(fma(x6, c2, c))
}

// reduceFast is x mod π/2 for |x| ≤ 120, and the quadrant.
func reduceFast(x float64, p *sincosPoly) (float64, int) {
	r := x * p.hpiInv
	n := (int32(r) + 0x800000) >> 24
	return fma(-float64(n), p.hpi, x), int(n)
}

// reduceLarge is x mod π/2 with 4/π to 192 bits, for |x| > 120.
func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi & 0xffffff) | 0x800000
	xi <<= shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = (res2 >> 32) | (res0 << 32)
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * pi63, int(n)
}

// sincosf returns glibc's sinf(y) (cos false) or cosf(y) (cos true).
func sincosf(y float32, cos bool) float32 {
	x := float64(y)
	p := &sincosTable[0]
	odd := 0
	if cos {
		odd = 1
	}
	switch top := abstop12(y); {
	case top < top12Pio4:
		if top < top12Tiny {
			if cos {
				return 1
			}
			return y
		}
		return sinfPoly(x, x*x, p, odd)
	case top < top12Fast:
		r, n := reduceFast(x, p)
		s := p.sign[n&3]
		if n&2 != 0 {
			p = &sincosTable[1]
		}
		return sinfPoly(r*s, r*r, p, n^odd)
	case top < top12Inf:
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		r, n := reduceLarge(xi)
		s := p.sign[(n+sign)&3]
		if (n+sign)&2 != 0 {
			p = &sincosTable[1]
		}
		return sinfPoly(r*s, r*r, p, n^odd)
	}
	return float32(math.NaN())
}

func sinf(y float32) float32 { return sincosf(y, false) }
func cosf(y float32) float32 { return sincosf(y, true) }
