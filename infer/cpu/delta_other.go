//go:build !amd64

package cpu

// dotF32 is ggml_vec_dot_f32 (see dotF32Go).
func dotF32(x, y []float32) float32 { return dotF32Go(x, y) }

// madF32 sets y[i] = fma(x[i], v, y[i]) (ggml_vec_mad_f32).
func madF32(y, x []float32, v float32) { madF32Go(y, x, v) }

// scaleF32 sets y[i] *= v (ggml_vec_scale_f32).
func scaleF32(y []float32, v float32) {
	for i := range y {
		y[i] *= v
	}
}

// deltaToken has no fused form here: the portable loops run.
func deltaToken(M, k, q, v, out []float32, decay, beta, scale float32) bool { return false }
