package quant

func softmaxF16SIMD(s []float32, scale float32) bool {
	if len(s) == 0 {
		return false
	}
	switch {
	case haveAVX512:
		softmaxF16(&s[0], len(s), scale)
	case haveF16AVX2():
		softmaxF16AVX2(&s[0], len(s), scale)
	default:
		return false
	}
	return true
}

// The AVX2 conversions take whole chunks of 8; the last len%8 go through
// the portable conversion, which rounds as VCVTPS2PH does.
func f32ToF16sSIMD(dst []uint16, src []float32) bool {
	if len(src) == 0 {
		return false
	}
	_ = dst[len(src)-1]
	switch {
	case haveAVX512:
		f32ToF16s(&src[0], len(src), &dst[0])
		return true
	case haveF16AVX2() && len(src) >= 8:
		f32ToF16sAVX2(&src[0], len(src)/8, &dst[0])
		for i := len(src) &^ 7; i < len(src); i++ {
			dst[i] = F32ToF16(src[i])
		}
		return true
	}
	return false
}

func roundF16sSIMD(dst, src []float32) bool {
	if len(src) == 0 {
		return false
	}
	_ = dst[len(src)-1]
	switch {
	case haveAVX512:
		roundF16s(&src[0], len(src), &dst[0])
		return true
	case haveF16AVX2() && len(src) >= 8:
		roundF16sAVX2(&src[0], len(src)/8, &dst[0])
		for i := len(src) &^ 7; i < len(src); i++ {
			dst[i] = RoundF16(src[i])
		}
		return true
	}
	return false
}
