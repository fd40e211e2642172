package infer

import "math"

// Rope holds the parameters of llama.cpp's ggml_rope_ext for one model, in
// its terms, so that both backends rotate exactly as llama.cpp does.
type Rope struct {
	HeadDim   int     // values per head in the rotated rows
	Dims      int     // rotated values per head (n_rot); HeadDim for qwen3
	Base      float32 // rope.freq_base (theta)
	FreqScale float32 // 1, or 1/rope.scaling.factor with YaRN
	// ExtFactor mixes extrapolated and interpolated frequencies: 0 without
	// YaRN, 1 with (llama.cpp's yarn_ext_factor default).
	ExtFactor  float32
	AttnFactor float32 // magnitude scale before YaRN's own; 1 for qwen3
	BetaFast   float32 // 32 in llama.cpp
	BetaSlow   float32 // 1 in llama.cpp
	// OrigContext is the context the model was trained with
	// (rope.scaling.original_context_length); used by YaRN only.
	OrigContext int
	// Mode says which values of a head form the rotated pairs.
	Mode RopeMode
	// Factors, if set, divide each pair's angle (ggml_rope_ext's
	// freq_factors: Llama 3's rope_freqs.weight, its llama3 scaling baked
	// into one factor per pair). A pointer keeps Rope comparable, so that
	// backends can key angle tables by it.
	Factors *FreqFactors
}

// RopeMode is how RoPE pairs the values of a head.
type RopeMode uint8

const (
	// RopeNeoX rotates (j, j+Dims/2): llama.cpp's LLAMA_ROPE_TYPE_NEOX
	// (qwen2, qwen3, gemma3).
	RopeNeoX RopeMode = iota
	// RopeNormal rotates adjacent values (2j, 2j+1): llama.cpp's
	// LLAMA_ROPE_TYPE_NORM (llama, mistral).
	RopeNormal
)

func (m RopeMode) String() string {
	if m == RopeNormal {
		return "normal"
	}
	return "neox"
}

// FreqFactors are the Dims/2 divisors of the pairs' angles.
type FreqFactors struct{ Values []float32 }

// CorrDims is ggml_rope_yarn_corr_dims: the range of rotation pairs over
// which YaRN ramps from extrapolated to interpolated frequencies.
func (r Rope) CorrDims() [2]float32 {
	start := float32(math.Floor(float64(r.corrDim(r.BetaFast))))
	end := float32(math.Ceil(float64(r.corrDim(r.BetaSlow))))
	return [2]float32{max(0, start), min(float32(r.Dims-1), end)}
}

// corrDim is ggml_rope_yarn_corr_dim: the pair index whose wavelength fits
// nRot turns into the original context.
func (r Rope) corrDim(nRot float32) float32 {
	turns := float32(r.OrigContext) / (nRot * 2 * float32(math.Pi))
	return float32(r.Dims) * logf(turns) / (2 * logf(r.Base))
}

// Angles fills cos[j] and sin[j], j < Dims/2, with the rotation of pair j at
// position pos, magnitude scaling and frequency factors included. It follows ggml's CPU
// ggml_rope_cache_init step by step (theta multiplied by theta_scale per pair
// in f32, not raised to a power), so the CPU backend matches llama.cpp to the
// last bit; the GPU may compute it its own way within rounding.
func (r Rope) Angles(pos int, cos, sin []float32) {
	thetaScale := float32(math.Pow(float64(r.Base), float64(-2/float32(r.Dims))))
	corr := r.CorrDims()
	theta := float32(pos)
	for j := 0; j < r.Dims/2; j++ {
		t := theta
		if r.Factors != nil {
			t /= r.Factors.Values[j]
		}
		c, s := r.yarn(t, corr, 2*j)
		cos[j], sin[j] = c, s
		theta *= thetaScale
	}
}

// yarn is ggml's rope_yarn for the pair at even index i0.
func (r Rope) yarn(thetaExtrap float32, corr [2]float32, i0 int) (cos, sin float32) {
	thetaInterp := r.FreqScale * thetaExtrap
	theta := thetaInterp
	mscale := r.AttnFactor
	if r.ExtFactor != 0 {
		mix := yarnRamp(corr[0], corr[1], i0) * r.ExtFactor
		theta = thetaInterp*(1-mix) + thetaExtrap*mix
		mscale *= 1 + 0.1*logf(1/r.FreqScale)
	}
	return cosf(theta) * mscale, sinf(theta) * mscale
}

// yarnRamp is ggml's rope_yarn_ramp: 1 below the low pair, 0 above the high
// one, linear between.
func yarnRamp(low, high float32, i0 int) float32 {
	y := (float32(i0/2) - low) / max(0.001, high-low)
	return 1 - min(1, max(0, y))
}

func logf(x float32) float32 { return float32(math.Log(float64(x))) }
