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
func rowDot(t gguf.Type, sdot, gemm bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	switch t {
	case gguf.Q8_0:
		return rowQ8_0(sdot, n, w, x, s)
	case gguf.Q4_0:
		return rowQ4_0(sdot, n, w, x, s)
	case gguf.Q2_0:
		return rowQ2_0(sdot, n, w, x, s)
	case gguf.Q4_K:
		return rowQ4_K(sdot, gemm, n, w, x, s)
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

// rowQ4_K: the assembly leaves the unscaled sums per sub-block (out[8b+j]),
// which are scaled and added as dotQ4_K does, or with gemm as dotQ4_KGemm:
// one FMA per super-block or one per pair of sub-blocks.
func rowQ4_K(sdot, gemm bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 8
	var acc, accMins float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q4_K, sdot, &w[b0*q4_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q4_KBytes:], x[(b0+i)*q8_KBytes:]
			scales := wb[4:16]
			dx := f32at(xb, 0)
			d, dmin := f16at(wb, 0)*dx, f16at(wb, 2)*dx
			var sumi, sumMins int32
			for j := 0; j < 8; j++ {
				sc, m := scaleMinK4(j, scales)
				sumMins += int32(m) * (bsum(xb, 2*j) + bsum(xb, 2*j+1))
				sumi += int32(sc) * s[8*i+j]
				if gemm && j%2 == 1 {
					acc = fma32(float32(sumi), d, acc)
					accMins = fma32(float32(sumMins), dmin, accMins)
					sumi, sumMins = 0, 0
				}
			}
			if !gemm {
				acc = fma32(float32(sumi), d, acc)
				accMins = fma32(float32(sumMins), dmin, accMins)
			}
		}
	}
	return acc - accMins
}

// The Q5_K and Q6_K rows: the assembly leaves the sums per lane of ggml's
// eight f32 lanes (out[64b+8j+l]: sub-block j for Q5_K, the 32 elements
// 32j… for Q6_K, lanes 4l…4l+3 of them), unscaled.

func rowQ5_K(sdot bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 64
	var acc [8]float32
	var summs float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q5_K, sdot, &w[b0*q5_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q5_KBytes:], x[(b0+i)*q8_KBytes:]
			scales := wb[4:16]
			dy := f32at(xb, 0)
			d, dmin := dy*f16at(wb, 0), -dy*f16at(wb, 2)
			var mins int32
			var lane [8]int32
			for j := 0; j < 8; j++ {
				sc, m := scaleMinK4(j, scales)
				mins += int32(m) * (bsum(xb, 2*j) + bsum(xb, 2*j+1))
				for l := range lane {
					lane[l] += int32(sc) * s[64*i+8*j+l]
				}
			}
			summs = fma32(dmin, float32(mins), summs)
			for l := range acc {
				acc[l] = fma32(d, float32(lane[l]), acc[l])
			}
		}
	}
	return sumLanes8(&acc) + summs
}

func rowQ6_K(sdot bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 64
	var acc [8]float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q6_K, sdot, &w[b0*q6_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q6_KBytes:], x[(b0+i)*q8_KBytes:]
			sc := wb[192:208]
			var lane [8]int32
			for g := 0; g < 16; g++ {
				scale := int32(int8(sc[g]))
				for e := 0; e < 4; e++ {
					lane[4*(g%2)+e] += scale * s[64*i+4*g+e]
				}
			}
			for l := 0; l < 8; l++ {
				lane[l] -= 32 * (bsum(xb, 2*l)*int32(int8(sc[2*l])) + bsum(xb, 2*l+1)*int32(int8(sc[2*l+1])))
			}
			d := f32at(xb, 0) * f16at(wb, 208)
			for l := range acc {
				acc[l] = fma32(d, float32(lane[l]), acc[l])
			}
		}
	}
	return sumLanes8(&acc)
}
