package quant

//go:generate sh -c "cd asm && go run ./neon -out ../neon_arm64.s"

import "github.com/bonsai-chat/bonsai/gguf"

// The NEON kernels (asm/neon) compute only integer sums, which are exact
// whatever the order: per block, per sub-block, or per SDOT lane where
// ggml's float lanes keep them apart. The row functions below (and the
// K-quants' in sums.go) then scale and add them with the very expressions
// of the portable dot products (q8_0.go, q4_0.go, q2_0.go, kquants.go), so
// the compiler rounds (and fuses) the float part identically and the
// results are bit for bit the portable kernels'.

//go:noescape
func q8_0SumsSdot(w, x *byte, blocks int, out *int32)

//go:noescape
func q8_0SumsNeon(w, x *byte, blocks int, out *int32)

//go:noescape
func q4_0SumsSdot(w, x *byte, blocks int, out *int32)

//go:noescape
func q4_0SumsNeon(w, x *byte, blocks int, out *int32)

//go:noescape
func q2_0SumsSdot(w, x *byte, blocks int, out *int32)

//go:noescape
func q2_0SumsNeon(w, x *byte, blocks int, out *int32)

//go:noescape
func q4_KSumsSdot(w, x *byte, blocks int, out *int32)

//go:noescape
func q4_KSumsNeon(w, x *byte, blocks int, out *int32)

//go:noescape
func q5_KSumsSdot(w, x *byte, blocks int, out *int32)

//go:noescape
func q5_KSumsNeon(w, x *byte, blocks int, out *int32)

//go:noescape
func q6_KSumsSdot(w, x *byte, blocks int, out *int32)

//go:noescape
func q6_KSumsNeon(w, x *byte, blocks int, out *int32)

// neonTypes are the types with NEON kernels.
var neonTypes = map[gguf.Type]bool{gguf.Q8_0: true, gguf.Q4_0: true, gguf.Q2_0: true, gguf.Q4_K: true, gguf.Q5_K: true, gguf.Q6_K: true}

// blockSums runs t's assembly, the SDOT variant or the plain one, over
// blocks weight blocks. (A switch, not a func value: the scratch stays on
// the caller's stack only when the noescape functions are called
// directly.)
func blockSums(t gguf.Type, sdot bool, w, x *byte, blocks int, out *int32) {
	switch {
	case t == gguf.Q8_0 && sdot:
		q8_0SumsSdot(w, x, blocks, out)
	case t == gguf.Q8_0:
		q8_0SumsNeon(w, x, blocks, out)
	case t == gguf.Q4_0 && sdot:
		q4_0SumsSdot(w, x, blocks, out)
	case t == gguf.Q4_0:
		q4_0SumsNeon(w, x, blocks, out)
	case t == gguf.Q2_0 && sdot:
		q2_0SumsSdot(w, x, blocks, out)
	case t == gguf.Q2_0:
		q2_0SumsNeon(w, x, blocks, out)
	case t == gguf.Q4_K && sdot:
		q4_KSumsSdot(w, x, blocks, out)
	case t == gguf.Q4_K:
		q4_KSumsNeon(w, x, blocks, out)
	case t == gguf.Q5_K && sdot:
		q5_KSumsSdot(w, x, blocks, out)
	case t == gguf.Q5_K:
		q5_KSumsNeon(w, x, blocks, out)
	case t == gguf.Q6_K && sdot:
		q6_KSumsSdot(w, x, blocks, out)
	case t == gguf.Q6_K:
		q6_KSumsNeon(w, x, blocks, out)
	}
}

// neonProductSdot and neonProductNeon are the Matrix kernels: row by row,
// each row against every token of the chunk while it is in L1.
func neonProductSdot(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	sumsProduct(true, m, a, r0, r1, t0, t1, y)
}

func neonProductNeon(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	sumsProduct(false, m, a, r0, r1, t0, t1, y)
}

// rowDot is one row · one token through the type's integer sums.
func rowDot(t gguf.Type, sdot bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	switch t {
	case gguf.Q8_0:
		return rowQ8_0(sdot, n, w, x, s)
	case gguf.Q4_0:
		return rowQ4_0(sdot, n, w, x, s)
	case gguf.Q2_0:
		return rowQ2_0(sdot, n, w, x, s)
	case gguf.Q4_K:
		return rowQ4_K(sdot, n, w, x, s)
	case gguf.Q5_K:
		return rowQ5_K(sdot, n, w, x, s)
	}
	return rowQ6_K(sdot, n, w, x, s)
}

func rowQ8_0(sdot bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	var sumf float32
	nb := n / qk8_0
	for b0 := 0; b0 < nb; b0 += sumsScratch {
		k := min(sumsScratch, nb-b0)
		blockSums(gguf.Q8_0, sdot, &w[b0*q8_0Bytes], &x[b0*q8_0Bytes], k, &s[0])
		for i, sumi := range s[:k] {
			wb, xb := w[(b0+i)*q8_0Bytes:], x[(b0+i)*q8_0Bytes:]
			sumf += float32(sumi) * (f16at(wb, 0) * f16at(xb, 0))
		}
	}
	return sumf
}

func rowQ4_0(sdot bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	var sumf float32
	nb := n / 32
	for b0 := 0; b0 < nb; b0 += sumsScratch {
		k := min(sumsScratch, nb-b0)
		blockSums(gguf.Q4_0, sdot, &w[b0*q4_0Bytes], &x[b0*q8_0Bytes], k, &s[0])
		for i, sumi := range s[:k] {
			wb, xb := w[(b0+i)*q4_0Bytes:], x[(b0+i)*q8_0Bytes:]
			sumf += float32(sumi) * (f16at(wb, 0) * f16at(xb, 0))
		}
	}
	return sumf
}

func rowQ2_0(sdot bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 2
	var sumf float32
	nb := n / 64
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q2_0, sdot, &w[b0*q2_0Bytes], &x[2*b0*q8_0Bytes], k, &s[0])
		for i := 0; i < k; i++ {
			b := b0 + i
			wb := w[b*q2_0Bytes:]
			var sumBlock float32
			for kk := 0; kk < 2; kk++ {
				xb := x[(2*b+kk)*q8_0Bytes:]
				sumBlock += f16at(xb, 0) * float32(s[2*i+kk])
			}
			sumf += f16at(wb, 0) * sumBlock
		}
	}
	return sumf
}
