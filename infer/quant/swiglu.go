package quant

// SwiGLU sets dst[i] = silu(gate[i])·up[i] as ggml_vec_swiglu_f32 computes
// it on x86 with AVX-512: blocks of 16 through ggml_v_silu (x / (1 +
// ggml_v_expf(−x))), the last len%16 elements through libm's expf (GlibcExpf). The
// slices must have equal lengths; dst may alias gate or up.
func SwiGLU(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	i := swigluSIMD(dst, gate, up)
	for ; i < n/16*16; i++ { // blocks of 16 without AVX-512: the same algorithm
		dst[i] = SiLU(gate[i]) * up[i]
	}
	for ; i < n; i++ {
		x := gate[i]
		dst[i] = x / (1 + GlibcExpf(-x)) * up[i]
	}
}
