package quant

//go:generate sh -c "cd asm && go run ./avx2k -out ../kquants_avx2_amd64.s"

import "github.com/bonsai-chat/bonsai/gguf"

// The AVX2 K-quant kernels, for x86 CPUs without AVX-512 (asm/avx2k):
// integer sums in assembly, the float part in sums.go, bit for bit the
// portable kernels'.

//go:noescape
func q4_KSumsAVX2(w, x *byte, blocks int, out *int32)

//go:noescape
func q5_KSumsAVX2(w, x *byte, blocks int, out *int32)

//go:noescape
func q6_KSumsAVX2(w, x *byte, blocks int, out *int32)

// avx2KTypes are the types kquantsAVX2Product runs.
var avx2KTypes = map[gguf.Type]bool{gguf.Q4_K: true, gguf.Q5_K: true, gguf.Q6_K: true}

// rowDot is one row · one token through the type's integer sums.
func rowDot(t gguf.Type, _ bool, n int, w, x []byte, s *[sumsScratch]int32) float32 {
	switch t {
	case gguf.Q4_K:
		return rowQ4_KAVX2(n, w, x, s)
	case gguf.Q5_K:
		return rowQ5_KAVX2(n, w, x, s)
	}
	return rowQ6_KAVX2(n, w, x, s)
}

// kquantsAVX2Product is the Matrix kernel of the AVX2 K-quants.
func kquantsAVX2Product(m *Matrix, a *Activations, r0, r1, t0, t1 int, y []float32) {
	sumsProduct(false, m, a, r0, r1, t0, t1, y)
}

// rowQ4_KAVX2: the assembly leaves per super-block the two integers of
// dotQ4_K, the scaled sum and the mins' (out[2b], out[2b+1]).
func rowQ4_KAVX2(n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 2
	var sumf float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		q4_KSumsAVX2(&w[b0*q4_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q4_KBytes:], x[(b0+i)*q8_KBytes:]
			sumi, sumMins := s[2*i], s[2*i+1]
			dx := f32at(xb, 0)
			sumf += f16at(wb, 0)*dx*float32(sumi) - f16at(wb, 2)*dx*float32(sumMins)
		}
	}
	return sumf
}

// rowQ5_KAVX2: the assembly leaves per super-block ggml's eight scaled
// lanes and the mins' integer (out[16b+l], out[16b+8]), the float part
// is dotQ5_K's.
func rowQ5_KAVX2(n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 16
	var acc [8]float32
	var summs float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		q5_KSumsAVX2(&w[b0*q5_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q5_KBytes:], x[(b0+i)*q8_KBytes:]
			dy := f32at(xb, 0)
			d, dmin := dy*f16at(wb, 0), -dy*f16at(wb, 2)
			lane := s[16*i : 16*i+9]
			summs = fma32(dmin, float32(lane[8]), summs)
			for l := range acc {
				acc[l] = fma32(d, float32(lane[l]), acc[l])
			}
		}
	}
	return sumLanes8(&acc) + summs
}

// rowQ6_KAVX2: the assembly leaves per super-block ggml's eight lanes,
// offset included (out[8b+l]); the float part is dotQ6_K's.
func rowQ6_KAVX2(n int, w, x []byte, s *[sumsScratch]int32) float32 {
	const per = sumsScratch / 8
	var acc [8]float32
	nb := n / qkK
	for b0 := 0; b0 < nb; b0 += per {
		k := min(per, nb-b0)
		q6_KSumsAVX2(&w[b0*q6_KBytes], &x[b0*q8_KBytes], k, &s[0])
		for i := 0; i < k; i++ {
			wb, xb := w[(b0+i)*q6_KBytes:], x[(b0+i)*q8_KBytes:]
			d := f32at(xb, 0) * f16at(wb, 208)
			lane := s[8*i : 8*i+8]
			for l := range acc {
				acc[l] = fma32(d, float32(lane[l]), acc[l])
			}
		}
	}
	return sumLanes8(&acc)
}
