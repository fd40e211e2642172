package infer

// The ops of hybrid architectures (qwen35: Gated DeltaNet layers beside gated
// full attention) and of Hadamard-rotated weights (Bonsai 2). They are part of
// Backend (see HybridOps); a backend that lacks one fails the pass with an
// error wrapping ErrUnsupportedOp, so that "auto" falls back to the CPU.
//
// # State
//
// Attention layers keep K and V in the KV cache (NewKVCache; the layer index
// of StoreKV and Attention is the attention layer's ordinal among the
// network's attention layers). Recurrent layers keep a state that cannot be
// truncated: for each recurrent layer, the last ConvWidth−1 inputs of its
// causal convolution and one HeadDim×HeadDim delta-rule matrix per value head
// (NewRecurrentState; the layer index of CausalConv and DeltaNet is the
// recurrent layer's ordinal). A pass that begins at Pos 0 starts every
// recurrent layer from zero state; a pass at a later Pos continues from the
// state the previous pass left, so the caller (infer.Model) must make sure
// that state belongs to position Pos, restoring a snapshot
// (ReadRecurrentState / WriteRecurrentState) or re-running from 0 if not.

// HybridOps are the Backend ops that recurrent layers and rotated weights
// need. Every op follows Backend's rules: it acts on the batch's active rows,
// checks its operands and records the first error for Commit.
type HybridOps interface {
	// NewRecurrentState allocates (and zeroes) the recurrent state; calling
	// it again replaces the previous one. A spec with no layers frees it.
	NewRecurrentState(spec RecurrentSpec) error
	// ReadRecurrentState copies the whole recurrent state into dst
	// (len spec.Floats(), in RecurrentSpec's layout) and
	// WriteRecurrentState copies src back. Both run outside a pass
	// (between Commit and the next Begin) and complete before returning.
	ReadRecurrentState(dst []float32) error
	WriteRecurrentState(src []float32) error

	// CopyCols copies column blocks: for each active row and h < c.Count,
	//	dst[c.Dst + h·c.Width + j] = src[c.Src + h·c.Stride + j], j < c.Width.
	// It splits per-head interleaved projections (qwen35's q|gate) and
	// slices a fused projection (q|k|v). dst may not alias src.
	CopyCols(dst, src Tensor, c Cols)
	// Unary sets dst = f(x) element-wise (f32, llama.cpp's formulas: see
	// Act). dst may equal x.
	Unary(dst, x Tensor, f Act)
	// Gate sets dst = x ⊙ f(g) element-wise (qwen35's sigmoid-gated
	// attention output, SiLU-gated DeltaNet output). dst may equal x or g.
	Gate(dst, x, g Tensor, f Act)
	// DecayGate sets dst = softplus(alpha + bias) ⊙ a, bias and a being F32
	// vectors of alpha.Cols() values broadcast over rows (qwen35's
	// g = softplus(W_α·x + dt_bias)·ssm_a, with ssm_a = −exp(A_log)). dst may
	// equal alpha.
	DecayGate(dst, alpha Tensor, bias, a Weight)
	// L2Norm normalises each group of `group` consecutive values of each
	// row as llama.cpp's build_gdn_l2_norm does:
	//	x / sqrt(mean(x²) + eps/group) / sqrt(group)
	// (ggml_rms_norm with eps/group, then scaled by 1/√group). dst may
	// equal x.
	L2Norm(dst, x Tensor, group int, eps float32)
	// CausalConv is the depthwise causal convolution of recurrent layer
	// `layer`, llama.cpp's ggml_ssm_conv: w has shape [width, channels]
	// (ne0 = width, F32), x and dst are n × channels, and for active row i
	//	dst[i][c] = Σ_{t<width} w[c][t] · u[i+t][c]
	// where u is the layer's conv state (the width−1 inputs before this
	// pass, zeros at Pos 0) followed by the rows of x. The state keeps the
	// last width−1 rows of u for the next pass.
	CausalConv(dst, x Tensor, w Weight, layer int)
	// DeltaNet runs the gated delta rule of recurrent layer `layer` over
	// the active rows, token by token in order, exactly as llama.cpp's
	// ggml_gated_delta_net (its CPU reference), per value head h with key
	// head h mod d.KHeads (ggml's tiled repeat) and S the layer's state for
	// head h (HeadDim×HeadDim, zero at Pos 0):
	//	S    = exp(g[h]) · S
	//	δ    = (v_h − Sᵀk) · beta[h]
	//	S    = S + k δᵀ
	//	dst_h = Sᵀ q / sqrt(HeadDim)
	// q and k are n × KHeads·HeadDim (already L2-normalised), v and dst
	// n × VHeads·HeadDim, g and beta n × VHeads. A backend may evaluate a
	// long batch in the chunked (parallel) form of the same recurrence; it
	// must agree with the sequential form within rounding.
	DeltaNet(dst, q, k, v, g, beta Tensor, layer int, d DeltaNetSpec)
	// Hadamard rotates each row of x into dst: a block-diagonal normalised
	// Sylvester Walsh–Hadamard transform H of r.Block values
	// (H[i][j] = (−1)^popcount(i&j)/√Block, natural order), with an optional
	// sign vector s (F32, x.Cols() values of ±1) and head regrouping P:
	//	dst = H(s ⊙ P(x))    (r.SignsAfter false: before a rotated matmul)
	//	dst = s ⊙ H(x)       (r.SignsAfter true: after the embedding lookup)
	// x.Cols() must be a multiple of r.Block. dst may equal x.
	Hadamard(dst, x Tensor, r Rotation)
}

// SeqStates is what a backend with recurrent ops adds to keep one state per
// sequence for passes over rows of several sequences (RowBackend, Row.Seq).
// Slot 0 is the state that NewRecurrentState made and that Forward's
// passes, ReadRecurrentState and WriteRecurrentState use.
type SeqStates interface {
	// NewSeqStates keeps n states of the RecurrentSpec given to
	// NewRecurrentState, slot 0 the present one and the others zero,
	// dropping any slots beyond n.
	NewSeqStates(n int) error
}

// DeltaNetInputFuser is a backend that runs a Gated DeltaNet layer's input
// stage, eight small ops between the projections and the delta rule, as
// one op where it pays (a decoding step on the GPU, where each op costs a
// dependent dispatch).
type DeltaNetInputFuser interface {
	// FuseDeltaNetInputs encodes what this sequence computes, with the
	// same roundings, and reports true; or encodes nothing and reports
	// false (the caller then encodes the sequence):
	//	CausalConv(conv, in.QKV, in.Conv, in.Layer); Unary(conv, conv, ActSiLU)
	//	q, k, v = conv's columns [0, KD), [KD, 2KD), [2KD, 2KD+VD)
	//	L2Norm(q, q, HeadDim, in.Eps); L2Norm(k, k, HeadDim, in.Eps)
	//	Unary(in.Beta, in.Beta, ActSigmoid)
	//	DecayGate(in.Alpha, in.Alpha, in.DTBias, in.SSMA)
	// with KD = KHeads·HeadDim and VD = VHeads·HeadDim; with in.X set,
	// preceded by the gates' projections
	//	MatMul(in.Beta, in.WBeta, in.X); MatMul(in.Alpha, in.WAlpha, in.X)
	// (a backend that cannot take those in the same op reports false).
	FuseDeltaNetInputs(in DeltaNetInputs) bool
}

// DeltaNetInputs are FuseDeltaNetInputs' operands: Q, K and V receive the
// normed heads, Beta and Alpha are gated in place, or, with X, projected
// from X by WBeta and WAlpha and gated.
type DeltaNetInputs struct {
	Q, K, V, QKV, Beta, Alpha Tensor
	Conv, DTBias, SSMA        Weight
	X                         Tensor
	WBeta, WAlpha             Weight
	Layer                     int
	Spec                      DeltaNetSpec
	Eps                       float32
}

// Act is an element-wise activation, each as llama.cpp's CPU computes it in
// f32.
type Act int

const (
	// ActSigmoid is 1/(1+e^−x) (ggml_sigmoid).
	ActSigmoid Act = iota + 1
	// ActSiLU is x/(1+e^−x) (ggml_silu).
	ActSiLU
	// ActSoftplus is logf(1+expf(x)), or x above 20 (ggml_softplus).
	ActSoftplus
	// ActGELU is the tanh GELU, 0.5·x·(1+tanh(√(2/π)·x·(1+0.044715·x²))),
	// as ggml_gelu computes it: 0 at x ≤ −10, x at x ≥ 10, between them
	// looked up for x rounded to f16 in a table of f16 results (ggml's
	// GGML_GELU_FP16). Gate with it is ggml_geglu (gemma3's FFN).
	ActGELU
)

func (a Act) String() string {
	switch a {
	case ActSigmoid:
		return "sigmoid"
	case ActSiLU:
		return "silu"
	case ActSoftplus:
		return "softplus"
	case ActGELU:
		return "gelu"
	}
	return "unknown activation"
}

// Cols selects column blocks for CopyCols.
type Cols struct {
	Dst, Src int // first column written in dst, read in src
	Width    int // columns per block
	Stride   int // distance between blocks in src
	Count    int // blocks
}

// DeltaNetSpec is the shape of one Gated DeltaNet layer.
type DeltaNetSpec struct {
	KHeads  int // ssm.group_count
	VHeads  int // ssm.time_step_rank; a multiple of KHeads
	HeadDim int // ssm.state_size
}

// RecurrentSpec sizes the recurrent state of a network's recurrent layers.
// Layout (ReadRecurrentState): for each layer in order, the conv state
// (ConvWidth−1 rows of Channels values, oldest first), then the delta-rule
// state (VHeads matrices of HeadDim×HeadDim, row-major as the backend's
// DeltaNet keeps them).
type RecurrentSpec struct {
	Layers    int
	Channels  int // conv channels: 2·KHeads·HeadDim + VHeads·HeadDim
	ConvWidth int // ssm.conv_kernel
	VHeads    int
	HeadDim   int
}

// LayerFloats is one layer's state in float32s.
func (s RecurrentSpec) LayerFloats() int64 {
	if s.Layers <= 0 {
		return 0
	}
	return int64(max(s.ConvWidth-1, 0))*int64(s.Channels) + int64(s.VHeads)*int64(s.HeadDim)*int64(s.HeadDim)
}

// Floats is the whole state in float32s.
func (s RecurrentSpec) Floats() int64 { return int64(max(s.Layers, 0)) * s.LayerFloats() }

// Bytes is the state's size in memory (f32).
func (s RecurrentSpec) Bytes() int64 { return 4 * s.Floats() }

// Rotation is a Hadamard transform for Backend.Hadamard.
type Rotation struct {
	Block int    // transform size (prism.hadamard.block_size)
	Signs Weight // F32 ±1 per column; nil for sign_mode identity
	// SignsAfter applies the signs after the transform (the inverse
	// rotation of token_embd's rows) instead of before it.
	SignsAfter bool
	// Regroup, when HeadDim > 0, first reorders the heads of x from
	// llama.cpp's tiled V-head order (head r·KHeads + k) to grouped order
	// (head k·Rep + r), Rep = heads/KHeads (prism.hadamard.gdn_v_grouped).
	Regroup HeadOrder
}

// HeadOrder describes x's heads for Rotation.Regroup.
type HeadOrder struct {
	HeadDim int
	KHeads  int
}
