package cpu

import "golang.org/x/sys/cpu"

// haveAVX512 selects the AVX-512 loops of the delta rule. They compute what
// the portable loops do, to the bit: each lane is one FMA (or product) per
// element, as ggml's.
var haveAVX512 = cpu.X86.HasAVX512F

//go:noescape
func dot64AVX512(x, y *float32, n int, out *[16]float32)

//go:noescape
func madAVX512(y, x *float32, n int, v float32)

//go:noescape
func scaleAVX512(y *float32, n int, v float32)

//go:noescape
func deltaRowsAVX512(m, k, q, v, out *float32, d int, decay, beta, scale float32)

// deltaToken runs one token of the delta rule on one head's M = Sᵀ with
// the fused AVX-512 rows when the head dimension allows, and reports
// whether it did.
func deltaToken(M, k, q, v, out []float32, decay, beta, scale float32) bool {
	d := len(v)
	if !haveAVX512 || d%64 != 0 || len(M) != d*d || len(k) != d || len(q) != d || len(out) != d {
		return false
	}
	deltaRowsAVX512(&M[0], &k[0], &q[0], &v[0], &out[0], d, decay, beta, scale)
	return true
}

// dotF32 is ggml_vec_dot_f32 (see dotF32Go).
func dotF32(x, y []float32) float32 {
	n := len(x)
	y = y[:n]
	steps := n &^ 63
	if !haveAVX512 || steps == 0 {
		return dotF32Go(x, y)
	}
	var acc [16]float32
	dot64AVX512(&x[0], &y[0], steps, &acc)
	return dotTail(quantReduce16(&acc), x, y, steps)
}

// madF32 sets y[i] = fma(x[i], v, y[i]) (ggml_vec_mad_f32).
func madF32(y, x []float32, v float32) {
	x = x[:len(y)]
	n := len(y) &^ 15
	if haveAVX512 && n > 0 {
		madAVX512(&y[0], &x[0], n, v)
	} else {
		n = 0
	}
	madF32Go(y[n:], x[n:], v)
}

// scaleF32 sets y[i] *= v (ggml_vec_scale_f32).
func scaleF32(y []float32, v float32) {
	n := len(y) &^ 15
	if haveAVX512 && n > 0 {
		scaleAVX512(&y[0], n, v)
	} else {
		n = 0
	}
	for i := n; i < len(y); i++ {
		y[i] *= v
	}
}
