//go:build amd64 || arm64

package quant

import "github.com/bonsai-chat/bonsai/gguf"

// The kernels of integer sums (the NEON ones, and the AVX2 K-quants'):
// assembly computes per row the exact integer sums of its blocks,
// sub-blocks or lanes against a token's activations, in segments of at
// most sumsScratch sums, and per-type row functions scale and add them in
// the portable dot product's float order, with its very expressions, so
// the results are the portable kernels' bit for bit. blockSums (the
// assembly) and rowDot (the row functions) are per architecture; v picks
// an assembly variant (SDOT or not on arm64).

// sumsScratch is the int32 sums one assembly call fills.
const sumsScratch = 512

// sumsProduct is the Matrix kernel: row by row, each row against every
// token of the chunk while it is in L1.
func sumsProduct(v bool, m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	var s [sumsScratch]int32
	for r := r0; r < r1; r++ {
		w := m.Row(r)
		for t := t0; t < t1; t++ {
			x := a.Token(t)
			y[t*m.Rows+r] = rowDot(m.Type, v, m.Cols, w, x, &s)
		}
	}
}

// The K-quant rows: the assembly leaves Q4_K's sums per sub-block
// (out[8b+j]) and Q5_K's and Q6_K's per lane of ggml's eight f32 lanes
// (out[64b+8j+l]: sub-block j for Q5_K, the 32 elements 32j… for Q6_K,
// lanes 4l…4l+3 of them), unscaled.

func rowQ4_K(v bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 8
	var sumf float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q4_K, v, &w[b0*q4_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q4_KBytes:], x[(b0+i)*q8_KBytes:]
			scales := wb[4:16]
			var sumi, sumMins int32
			for j := 0; j < 8; j++ {
				sc, m := scaleMinK4(j, scales)
				sumMins += int32(m) * (bsum(xb, 2*j) + bsum(xb, 2*j+1))
				sumi += int32(sc) * s[8*i+j]
			}
			dx := f32at(xb, 0)
			sumf += f16at(wb, 0)*dx*float32(sumi) - f16at(wb, 2)*dx*float32(sumMins)
		}
	}
	return sumf
}

func rowQ5_K(v bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 64
	var acc [8]float32
	var summs float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q5_K, v, &w[b0*q5_KBytes], &x[b0*q8_KBytes], k, &s[0])
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

func rowQ6_K(v bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 64
	var acc [8]float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		blockSums(gguf.Q6_K, v, &w[b0*q6_KBytes], &x[b0*q8_KBytes], k, &s[0])
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
