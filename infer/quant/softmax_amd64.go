package quant

func softmaxF16SIMD(s []float32, scale float32) bool {
	if !haveAVX512 || len(s) == 0 {
		return false
	}
	softmaxF16(&s[0], len(s), scale)
	return true
}

func f32ToF16sSIMD(dst []uint16, src []float32) bool {
	if !haveAVX512 || len(src) == 0 {
		return false
	}
	_ = dst[len(src)-1]
	f32ToF16s(&src[0], len(src), &dst[0])
	return true
}

func roundF16sSIMD(dst, src []float32) bool {
	if !haveAVX512 || len(src) == 0 {
		return false
	}
	_ = dst[len(src)-1]
	roundF16s(&src[0], len(src), &dst[0])
	return true
}
