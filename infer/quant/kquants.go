package quant

import (
	"encoding/binary"
	"math"
)

// K-quants: super-blocks of 256. Layouts (ggml-common.h):
//   Q4_K { f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }            144 B
//   Q5_K { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] } 176 B
//   Q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }           210 B
//   Q8_K { f32 d; i8 qs[256]; i16 bsums[16] }                      292 B
// Q4_K/Q5_K: eight sub-blocks of 32 with 6-bit scale and min packed in
// scales[12]; x = d·sc·q − dmin·m. Q6_K: sixteen sub-blocks of 16 with i8
// scales; x = d·sc·(q − 32).

// scaleMinK4 unpacks sub-block j's 6-bit scale and min (get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// packScaleMinK4 is the inverse of scaleMinK4 for all eight sub-blocks.
func packScaleMinK4(ls, lm *[8]uint8, q []byte) {
	clear(q[:12])
	for j := 0; j < 8; j++ {
		if j < 4 {
			q[j] = ls[j]
			q[j+4] = lm[j]
		} else {
			q[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
			q[j-4] |= (ls[j] >> 4) << 6
			q[j] |= (lm[j] >> 4) << 6
		}
	}
}

func dequantizeQ4_K(src []byte, dst []float32) {
	for b := 0; b*qkK < len(dst); b++ {
		blk := src[b*q4_KBytes:]
		d, dmin := f16at(blk, 0), f16at(blk, 2)
		scales, qs := blk[4:16], blk[16:144]
		y := dst[b*qkK:]
		for j := 0; j < 4; j++ { // 64 elements: low nibbles then high nibbles
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			d1, mm1 := d*float32(sc1), dmin*float32(m1)
			d2, mm2 := d*float32(sc2), dmin*float32(m2)
			q := qs[32*j:]
			for l := 0; l < 32; l++ {
				y[64*j+l] = float32(d1*float32(q[l]&0xf)) - mm1
				y[64*j+32+l] = float32(d2*float32(q[l]>>4)) - mm2
			}
		}
	}
}

func dequantizeQ5_K(src []byte, dst []float32) {
	for b := 0; b*qkK < len(dst); b++ {
		blk := src[b*q5_KBytes:]
		d, dmin := f16at(blk, 0), f16at(blk, 2)
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:176]
		y := dst[b*qkK:]
		for j := 0; j < 4; j++ {
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			d1, mm1 := d*float32(sc1), dmin*float32(m1)
			d2, mm2 := d*float32(sc2), dmin*float32(m2)
			u1, u2 := byte(1)<<(2*j), byte(2)<<(2*j)
			q := qs[32*j:]
			for l := 0; l < 32; l++ {
				lo, hi := int32(q[l]&0xf), int32(q[l]>>4)
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
				y[64*j+l] = float32(d1*float32(lo)) - mm1
				y[64*j+32+l] = float32(d2*float32(hi)) - mm2
			}
		}
	}
}

// q6Value is element e (0..255) of a Q6_K block as q − 32.
func q6Value(ql, qh []byte, e int) int32 {
	half, r := e/128, e%128
	l, quarter := r%32, r/32
	low := ql[64*half+l+32*(quarter&1)]
	if quarter >= 2 {
		low >>= 4
	}
	high := qh[32*half+l] >> (2 * quarter) & 3
	return int32(low&0xf|high<<4) - 32
}

func dequantizeQ6_K(src []byte, dst []float32) {
	for b := 0; b*qkK < len(dst); b++ {
		blk := src[b*q6_KBytes:]
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		d := f16at(blk, 208)
		for e := 0; e < qkK; e++ {
			dst[b*qkK+e] = d * float32(int8(sc[e/16])) * float32(q6Value(ql, qh, e))
		}
	}
}

func dequantizeQ8_K(src []byte, dst []float32) {
	for b := 0; b*qkK < len(dst); b++ {
		blk := src[b*q8_KBytes:]
		d := f32at(blk, 0)
		for j := 0; j < qkK; j++ {
			dst[b*qkK+j] = d * float32(int8(blk[4+j]))
		}
	}
}

// quantizeQ8_K is quantize_row_q8_K_ref, which x86 also uses for
// activations: iscale = −127/max (max the value of largest magnitude),
// q = min(127, nearest_int(iscale·x)), d = 1/iscale, plus sums per 16.
func quantizeQ8_K(src []float32, dst []byte) {
	for b := 0; b*qkK < len(src); b++ {
		x := src[b*qkK : (b+1)*qkK]
		blk := dst[b*q8_KBytes : (b+1)*q8_KBytes]
		var amax, mx float32
		for _, v := range x {
			if abs32(v) > amax {
				amax, mx = abs32(v), v
			}
		}
		if amax == 0 {
			clear(blk) // ggml leaves bsums stale; zero is what they sum to
			continue
		}
		iscale := -127 / mx
		for j, v := range x {
			blk[4+j] = byte(int8(min(127, nearestInt(iscale*v))))
		}
		for j := 0; j < qkK/16; j++ {
			var s int32
			for _, q := range blk[4+16*j : 4+16*j+16] {
				s += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(blk[q8_KBsums+2*j:], uint16(int16(s)))
		}
		binary.LittleEndian.PutUint32(blk, math.Float32bits(1/iscale))
	}
}

// The quantizers and dequantizers write float32(a*b) where a product meets
// an addition: ggml's reference code runs unfused (ggml-base is built for
// baseline x86-64), while Go may fuse x*y+z into one FMA on arm64, and the
// conversion forbids that, so every architecture writes and reads the
// same bytes as llama.cpp's.

// makeQKX2Quants is ggml's make_qkx2_quants: an asymmetric (scale, min) fit
// of x to levels 0..nmax, searching nstep rescalings for the least weighted
// error. It returns the scale and −min.
func makeQKX2Quants(nmax int32, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		mn = min(mn, x[i])
		mx = max(mx, x[i])
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		clear(L[:n])
		return 0, -mn
	}
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return diff * diff
	}
	var bestError float32
	for i := 0; i < n; i++ {
		l := min(nmax, max(0, nearestInt(iscale*(x[i]-mn))))
		L[i] = uint8(l)
		bestError += float32(weights[i] * errOf(float32(scale*float32(L[i]))+mn-x[i]))
	}
	if nstep < 1 {
		return scale, -mn
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := min(nmax, max(0, nearestInt(iscale*(x[i]-mn))))
			Laux[i] = uint8(l)
			w := weights[i]
			sumL += float32(w * float32(l))
			sumL2 += float32(w * float32(l) * float32(l))
			sumXL += float32(w * float32(l) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				curError += float32(weights[i] * errOf(float32(thisScale*float32(Laux[i]))+thisMin-x[i]))
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale, mn = thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

// quantizeQ45K is quantize_row_q{4,5}_K_ref; nmax is 15 or 31 and the
// search parameters differ between the two. It returns the levels L and
// writes d, dmin and the packed scales into blk.
func quantizeQ45K(x []float32, blk []byte, L *[qkK]uint8, nmax int32, rmin, rdelta float32, nstep int) {
	var scales, mins [8]float32
	var weights [32]float32
	var Laux [32]uint8
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], Laux[:], rmin, rdelta, nstep, false)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var ls, lm [8]uint8
	for j := 0; j < 8; j++ {
		ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
	}
	packScaleMinK4(&ls, &lm, blk[4:16])
	binary.LittleEndian.PutUint16(blk[0:], F32ToF16(maxScale/63))
	binary.LittleEndian.PutUint16(blk[2:], F32ToF16(maxMin/63))
	d, dmin := f16at(blk, 0), f16at(blk, 2)
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, blk[4:16])
		dj := d * float32(sc)
		if dj == 0 {
			continue
		}
		dm := dmin * float32(m)
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(min(nmax, max(0, nearestInt((x[32*j+ii]+dm)/dj))))
		}
	}
}

func quantizeQ4_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for b := 0; b*qkK < len(src); b++ {
		blk := dst[b*q4_KBytes : (b+1)*q4_KBytes]
		quantizeQ45K(src[b*qkK:(b+1)*qkK], blk, &L, 15, -1, 0.1, 20)
		q := blk[16:]
		for j := 0; j < qkK; j += 64 {
			for l := 0; l < 32; l++ {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
}

func quantizeQ5_K(src []float32, dst []byte) {
	var L [qkK]uint8
	for b := 0; b*qkK < len(src); b++ {
		blk := dst[b*q5_KBytes : (b+1)*q5_KBytes]
		quantizeQ45K(src[b*qkK:(b+1)*qkK], blk, &L, 31, -0.5, 0.1, 15)
		qh, ql := blk[16:48], blk[48:176]
		clear(qh)
		m1, m2 := byte(1), byte(2)
		for n := 0; n < qkK; n += 64 {
			for j := 0; j < 32; j++ {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[n/2+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

// makeQXQuants is make_qx_quants with rmse_type 1 and no importance
// weights (what quantize_row_q6_K_ref uses): a symmetric fit to levels
// −nmax..nmax−1 (stored +nmax), trying 18 rescalings.
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if abs32(v) > amax {
			amax, mx = abs32(v), v
		}
	}
	if amax < groupMaxEp {
		clear(L[:len(x)])
		return 0
	}
	level := func(iscale, v float32) int32 { return max(-nmax, min(nmax-1, nearestInt(iscale*v))) }
	iscale := -float32(nmax) / mx
	var sumLX, sumL2 float32
	for i, v := range x {
		l := level(iscale, v)
		L[i] = int8(l + nmax)
		w := v * v
		sumLX += float32(w * v * float32(l))
		sumL2 += float32(w * float32(l) * float32(l))
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / mx
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := level(iscale, v)
			w := v * v
			sumLX += float32(w * v * float32(l))
			sumL2 += float32(w * float32(l) * float32(l))
		}
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			for i, v := range x {
				L[i] = int8(nmax + level(iscale, v))
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

// quantizeQ6_K is quantize_row_q6_K_ref.
func quantizeQ6_K(src []float32, dst []byte) {
	var L [qkK]int8
	var scales [16]float32
	for b := 0; b*qkK < len(src); b++ {
		x := src[b*qkK : (b+1)*qkK]
		blk := dst[b*q6_KBytes : (b+1)*q6_KBytes]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < 16; ib++ {
			s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if abs32(s) > maxAbsScale {
				maxAbsScale, maxScale = abs32(s), s
			}
		}
		clear(blk)
		if maxAbsScale < groupMaxEp {
			continue
		}
		iscale := -128 / maxScale
		binary.LittleEndian.PutUint16(blk[208:], F32ToF16(1/iscale))
		sc := blk[192:208]
		for ib := 0; ib < 16; ib++ {
			sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		d := f16at(blk, 208)
		for j := 0; j < 16; j++ {
			dj := d * float32(int8(sc[j]))
			if dj == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(max(-32, min(31, nearestInt(x[16*j+ii]/dj))) + 32)
			}
		}
		ql, qh := blk[0:128], blk[128:192]
		for j := 0; j < qkK; j += 128 {
			for l := 0; l < 32; l++ {
				q1, q2 := uint8(L[j+l])&0xf, uint8(L[j+l+32])&0xf
				q3, q4 := uint8(L[j+l+64])&0xf, uint8(L[j+l+96])&0xf
				ql[j/2+l] = q1 | q3<<4
				ql[j/2+l+32] = q2 | q4<<4
				qh[j/4+l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
			}
		}
	}
}

// The K-quant dot products follow ggml_vec_dot_q{4,5,6}_K_q8_K: integer
// sums per sub-block times the sub-block's integer scale, then one float
// multiply by d_w·d_x per super-block; mins use Q8_K's block sums.

func bsum(x []byte, j int) int32 { return int32(int16(le16(x, q8_KBsums+2*j))) }

// dotQ4_K and dotQ4_KGemm add up as ggml's repacked Q4_K kernels
// (q4_K_8x8_q8_K), which llama.cpp's x86 build runs for every Q4_K matrix
// whose row count is a multiple of 8: per row one f32 sum for the scales
// and one for the mins, and their difference at the end. The two kernels
// differ in how often they round: the gemv (dotQ4_K) adds each
// super-block's integers up first and makes one FMA per super-block with
// d_w·d_x and dmin_w·d_x; the gemm (dotQ4_KGemm) makes one per pair of
// sub-blocks, four per super-block. Which of the two a token meets depends
// on its place in the product (Matrix.gemmTokens). (Other row counts go
// through ggml_vec_dot_q4_K_q8_K's eight lanes.)
func dotQ4_K(n int, w, x []byte) float32 {
	var acc, accMins float32
	for b := 0; b < n/qkK; b++ {
		wb, xb := w[b*q4_KBytes:], x[b*q8_KBytes:]
		var sumi, sumMins int32
		for k := 0; k < 4; k++ {
			s, m := q4KPairSums(wb, xb, k)
			sumi += s
			sumMins += m
		}
		dx := f32at(xb, 0)
		acc = fma32(float32(sumi), f16at(wb, 0)*dx, acc)
		accMins = fma32(float32(sumMins), f16at(wb, 2)*dx, accMins)
	}
	return acc - accMins
}

func dotQ4_KGemm(n int, w, x []byte) float32 {
	var acc, accMins float32
	for b := 0; b < n/qkK; b++ {
		wb, xb := w[b*q4_KBytes:], x[b*q8_KBytes:]
		dx := f32at(xb, 0)
		d, dmin := f16at(wb, 0)*dx, f16at(wb, 2)*dx
		for k := 0; k < 4; k++ {
			s, m := q4KPairSums(wb, xb, k)
			acc = fma32(float32(s), d, acc)
			accMins = fma32(float32(m), dmin, accMins)
		}
	}
	return acc - accMins
}

// q4KPairSums is the exact integer part of sub-blocks 2k and 2k+1 of one
// Q4_K super-block wb against the Q8_K block xb: Σ_j sc_j·Σ u·q and
// Σ_j m_j·(Q8_K's sums of sub-block j).
func q4KPairSums(wb, xb []byte, k int) (sumi, sumMins int32) {
	scales, q, q8 := wb[4:16], wb[16+32*k:], xb[4:4+qkK]
	for j := 2 * k; j < 2*k+2; j++ {
		sc, m := scaleMinK4(j, scales)
		sumMins += int32(m) * (bsum(xb, 2*j) + bsum(xb, 2*j+1))
		var s int32
		for l := 0; l < 32; l++ {
			v := q[l] & 0xf
			if j%2 == 1 {
				v = q[l] >> 4
			}
			s += int32(v) * int32(int8(q8[32*j+l]))
		}
		sumi += int32(sc) * s
	}
	return sumi, sumMins
}

// dotQ5_K and dotQ6_K add up in the order of ggml's AVX2 kernels, which
// llama.cpp's x86 build runs for these types at batch 1 and in prompts
// alike: eight f32 lanes, lane l holding elements 4l…4l+3 of every group of
// 32, one FMA per super-block with d_w·d_x, and the lanes summed
// (4+0)+(6+2) + (5+1)+(7+3) at the end. Any other order moves a product by
// an ulp, and an activation sitting on an 8-bit rounding boundary then
// rounds the other way downstream (infer/parity measures it).
func dotQ5_K(n int, w, x []byte) float32 {
	var acc [8]float32
	var summs float32
	for b := 0; b < n/qkK; b++ {
		wb, xb := w[b*q5_KBytes:], x[b*q8_KBytes:]
		scales, qh, qs, q8 := wb[4:16], wb[16:48], wb[48:176], xb[4:4+qkK]
		dy := f32at(xb, 0)
		d, dmin := dy*f16at(wb, 0), -dy*f16at(wb, 2)
		var mins int32
		var lane [8]int32
		for j := 0; j < 8; j++ {
			sc, m := scaleMinK4(j, scales)
			mins += int32(m) * (bsum(xb, 2*j) + bsum(xb, 2*j+1))
			q := qs[32*(j/2):]
			for l := 0; l < 32; l++ {
				v := int32(q[l] & 0xf)
				if j%2 == 1 {
					v = int32(q[l] >> 4)
				}
				if qh[l]>>j&1 != 0 {
					v += 16
				}
				lane[l/4] += int32(sc) * v * int32(int8(q8[32*j+l]))
			}
		}
		summs = fma32(dmin, float32(mins), summs)
		for l := range acc {
			acc[l] = fma32(d, float32(lane[l]), acc[l])
		}
	}
	return sumLanes8(&acc) + summs
}

func dotQ6_K(n int, w, x []byte) float32 {
	var acc [8]float32
	for b := 0; b < n/qkK; b++ {
		wb, xb := w[b*q6_KBytes:], x[b*q8_KBytes:]
		ql, qh, sc, q8 := wb[0:128], wb[128:192], wb[192:208], xb[4:4+qkK]
		// ggml works on the unsigned 6-bit codes and takes the −32 offset
		// out once per lane through Q8_K's block sums.
		var lane [8]int32
		for e := 0; e < qkK; e++ {
			u := q6Value(ql, qh, e) + 32
			lane[(e%32)/4] += int32(int8(sc[e/16])) * u * int32(int8(q8[e]))
		}
		for l := 0; l < 8; l++ {
			lane[l] -= 32 * (bsum(xb, 2*l)*int32(int8(sc[2*l])) + bsum(xb, 2*l+1)*int32(int8(sc[2*l+1])))
		}
		d := f32at(xb, 0) * f16at(wb, 208)
		for l := range acc {
			acc[l] = fma32(d, float32(lane[l]), acc[l])
		}
	}
	return sumLanes8(&acc)
}

// sumLanes8 is ggml's horizontal sum of an 8-lane f32 register (hsum_float_8).
func sumLanes8(a *[8]float32) float32 {
	return ((a[4] + a[0]) + (a[6] + a[2])) + ((a[5] + a[1]) + (a[7] + a[3]))
}
