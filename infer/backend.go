package infer

import (
	"fmt"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/sample"
)

// Backend runs the operations of a transformer forward pass. The CPU backend
// (infer/cpu) executes each op as it is called; the GPU backend (infer/gpu)
// records the ops of one pass into a single command buffer and submits it at
// Commit. The forward pass (qwen3.go) is written once against this interface
// and reads like the math.
//
// # Data model
//
//   - Weights are tensors of the GGUF file, bound once with LoadWeight and
//     never copied per token. The CPU backend keeps the mapped bytes
//     (gguf.File.Data); the GPU backend uploads them. Any type that
//     infer/quant knows may be bound; F32 is what norms use.
//   - Activations live in backend-owned Tensors made by NewTensor: row-major
//     float32 matrices of Rows() × Cols(), one row per token of the batch.
//     They are allocated once at load with the largest batch size and reused
//     for every pass, so a pass allocates nothing.
//   - The KV cache is backend-owned (NewKVCache), stored as f16 like
//     llama.cpp's default cache type: K and V are rounded to f16 when stored.
//
// # A pass
//
// Every op is called between Begin and Commit:
//
//	b.Begin(infer.Batch{Tokens: toks, Pos: pos})
//	b.Phase(profile.Embed)
//	b.Embed(x, tokenEmbd)
//	... ops ...
//	b.LastRow(last, x)
//	b.MatMul(logits, output, last)
//	b.Read(logits, dst)
//	err := b.Commit()
//
// The batch holds n = len(Tokens) tokens at positions Pos, Pos+1, …,
// Pos+n−1. An op acts on the batch's active rows of each Tensor it touches:
// the first min(Rows(), n) rows. A Tensor of one row therefore acts on one row
// whatever the batch size; that is how the output head runs only on the last
// token (LastRow). Rows beyond the active ones are left as they were.
//
// Ops return nothing, so a pass reads like the math. A backend checks each
// op's operands (shapes, types, positions) and keeps the first error, which
// Commit returns (then resets); after an error the remaining ops of the pass
// are skipped. A backend may check lazily, but never panics on bad operands.
//
// Unless an op says otherwise, dst may not alias an input. Ops that say
// "in place" modify their operand.
//
// # Numerics
//
// Results must match llama.cpp's CPU build within rounding: before a MatMul
// the activations are quantized to the weight's vec-dot type
// (quant.VecDotType: Q8_0 for Q1_0/Q2_0/Q4_0/Q8_0, Q8_K for K-quants, F16 for
// F16, …) exactly as llama.cpp does; norms, RoPE, softmax and SwiGLU run in
// f32; K and V are rounded to f16 when stored, and attention rounds q and
// its softmax weights to f16 before they meet K and V (see Attention). The
// CPU backend (infer/cpu) is the reference, down to llama.cpp's order of
// float operations where that was measured to matter. A faster kernel that
// changes the result beyond rounding needs the parity tests' approval.
//
// # Loading
//
// infer.Load binds the weights, allocates the tensors and the KV cache, and
// runs one trial token through the backend. A backend that cannot run the
// model (a shape or type its kernels lack) should fail there, at the latest
// in that pass's Commit, so that "auto" falls back to the CPU instead of
// failing at the first prompt.
//
// # Profiling
//
// Phase(p) says the ops that follow belong to profile phase p, until the next
// Phase call or Commit. While profiling is on (SetProfiling), the backend
// accumulates the time of each phase — wall-clock timers on the CPU,
// timestamp queries on the GPU — and TakeProfile returns and resets it. With
// profiling off, Phase should cost next to nothing.
//
// A Backend is used from one goroutine at a time (the engine goroutine).
type Backend interface {
	// Name is the registry name ("cpu", "gpu").
	Name() string
	// Info describes the device for `bonsai info` and the TUI's backend
	// panel.
	Info() BackendInfo

	// LoadWeight binds a model tensor (infer.Load passes each tensor of the
	// file, data being its bytes in the file's mapping, gguf.File.Data). The
	// bytes stay valid and unchanged until the backend is closed: the CPU
	// keeps referring to them, the GPU uploads them here. Binding the same
	// name twice returns the first Weight. It fails with an error wrapping
	// ErrUnsupportedType for a tensor type the backend has no kernel for, and
	// ErrBadShape when len(data) does not match type and shape.
	LoadWeight(w WeightData) (Weight, error)
	// NewTensor allocates a zeroed float32 activation buffer of rows × cols.
	// name is for debugging and error messages only.
	NewTensor(name string, rows, cols int) (Tensor, error)
	// NewKVCache allocates the K and V caches: for each of spec.Layers
	// layers, spec.Context positions of spec.KVHeads × spec.HeadDim values
	// each for K and for V, of the types spec.KVTypes names. A backend
	// holds one cache; calling it again replaces (frees) the previous one.
	// A backend without kernels for a type fails with an error wrapping
	// ErrUnsupportedType.
	NewKVCache(spec KVSpec) error

	// Begin starts a pass over the batch. len(b.Tokens) must be at least 1
	// and at most the rows of the Tensors the pass uses; positions
	// b.Pos … b.Pos+len(b.Tokens)−1 must fit the KV cache (else Commit
	// returns an error wrapping ErrContextFull). Positions ≥ b.Pos in the
	// cache are overwritten by this pass; earlier ones are what attention
	// sees as the past, so reusing a cached prompt prefix is just starting at
	// a later Pos.
	Begin(b Batch)
	// Commit runs (GPU: submits) everything since Begin and waits until it is
	// done and every Read/Argmax destination is filled. It returns the first
	// error of the pass.
	Commit() error

	// Phase marks the start of profile phase p for the ops that follow.
	Phase(p profile.Phase)

	// Embed sets row i of dst to row Tokens[i] of the embedding matrix w
	// (token_embd.weight, shape [n_embd, n_vocab], any quantized type),
	// dequantized to f32. dst is n × n_embd.
	Embed(dst Tensor, w Weight)
	// MatMul sets row i of dst to W·x_i for each active row: w has shape
	// [k, m] (ne0 = k inputs, m outputs), x is rows × k, dst is rows × m.
	// x is first quantized to quant.VecDotType(w.Type()), as llama.cpp does.
	MatMul(dst Tensor, w Weight, x Tensor)
	// RMSNorm sets dst to x/rms(x) ⊙ w over each group of len(w) consecutive
	// values of each row: rms(x) = sqrt(mean(x²) + eps), computed in f32 as
	// ggml_rms_norm does, then multiplied by the F32 weight w. With len(w) =
	// Cols() it is the usual per-token norm; with len(w) = head_dim it is the
	// per-head Q/K norm. dst may equal x (in place).
	RMSNorm(dst, x Tensor, w Weight, eps float32)
	// Rope rotates x in place with NEOX-style RoPE (llama.cpp's
	// GGML_ROPE_TYPE_NEOX): each row holds heads of r.HeadDim values; within
	// a head the pairs (j, j+Dims/2), j < Dims/2, are rotated by the angles
	// of Rope.Angles at the row's position (Pos+i); values at index ≥ Dims
	// are left alone. Rope.Angles is the reference: a backend may precompute
	// it, but must reproduce it within rounding, YaRN included.
	Rope(x Tensor, r Rope)
	// StoreKV writes the active rows of k and v (each n × KVHeads·HeadDim,
	// after norm and RoPE for k) into the cache of layer at positions
	// Pos … Pos+n−1, rounded to f16 or quantized to Q8_0 per head (as
	// llama.cpp's CPU build quantizes activations), as the cache's types
	// say.
	StoreKV(layer int, k, v Tensor)
	// Attention is causal grouped-query attention of q against the cache of
	// layer: for each active row i (position p = Pos+i) and each query head
	// h, with kv head g = h / (Heads/KVHeads) as in ggml's broadcasting,
	//	s_t   = scale · f16(q_{i,h}) · K_{g,t}   for t = 0 … p
	//	a     = softmax(s)                       (f32, max-subtracted)
	//	dst_{i,h} = Σ_t f16(a_t) V_{g,t}
	// q and dst are n × Heads·HeadDim. K and V come from the cache, so
	// StoreKV of this layer must precede it in the pass. With a quantized
	// K or V (KVTypes.Quantized) it is llama.cpp's flash attention instead
	// (which llama.cpp requires for a quantized V), row by row in position
	// order with an online softmax: q is converted to K's vec-dot type
	// (Q8_0 for a Q8_0 K: integer dots), M and S the running max and sum,
	//	s = scale · q·K_t; if s > M { acc ·= e^(M−s); M = s } else w = e^(s−M)
	//	acc += w·V_t; S = S·e^(M_old−M) + w;  dst = acc / S
	// with acc in f32 (in f16 for an f16 V beside a Q8_0 K, as ggml).
	// With a.Window = w > 0 (sliding-window attention) row i sees only
	// the last w positions, t = max(0, p−w+1) … p, as llama.cpp's
	// LLAMA_SWA_TYPE_STANDARD masks t when p − t ≥ w; the positions before
	// weigh exactly 0, as llama.cpp's −∞ mask makes them.
	Attention(dst, q Tensor, layer int, a Attn)
	// SwiGLU sets dst = silu(gate) ⊙ up, silu(x) = x/(1+e^−x), in f32.
	// dst may equal gate or up.
	SwiGLU(dst, gate, up Tensor)
	// Add sets dst = a + b element-wise. dst may equal a or b (the residual
	// add is Add(x, x, y)).
	Add(dst, a, b Tensor)
	// AddBias adds the F32 vector bias (x.Cols() values) to each active
	// row of x, in place: a projection's bias (qwen2's q, k and v), as
	// ggml_add broadcasts it over the rows.
	AddBias(x Tensor, bias Weight)
	// Scale multiplies each active row of x by s, in place (ggml_scale:
	// gemma3's embeddings by √n_embd).
	Scale(x Tensor, s float32)
	// LastRow copies the batch's last active row of src (row n−1) into the
	// first row of dst, which has src.Cols() columns (usually one row).
	LastRow(dst, src Tensor)

	// Read copies the active rows of t into dst (row-major, len(dst) ≥
	// active rows × Cols()). dst is filled when Commit returns, not before;
	// it must stay valid until then.
	Read(t Tensor, dst []float32)
	// Argmax sets dst[i] to the index of the largest value in active row i
	// of t (the first one on ties, as llama.cpp's greedy sampler). Filled at
	// Commit, like Read. It lets the GPU skip reading back whole logits when
	// decoding greedily.
	Argmax(t Tensor, dst []int32)

	// SetProfiling turns phase timing on or off (and resets it).
	SetProfiling(on bool)
	// TakeProfile returns the phase times accumulated since the last call
	// (Tokens counts the tokens of the passes) and resets them.
	TakeProfile() profile.Sample

	// Memory reports what the backend holds.
	Memory() BackendMemory

	// Close releases device memory and the weights' bindings. The Backend is
	// unusable afterwards.
	Close() error

	// The ops of recurrent layers and rotated weights (recurrent.go).
	HybridOps
}

// Weight is a bound model tensor. Its shape is GGUF's: ne0 (the row length,
// the input width of a matmul) first.
type Weight interface {
	Name() string
	Type() gguf.Type
	Shape() []int64
}

// WeightData is a model tensor to bind: GGUF's name, type, shape (ne0
// first) and bytes.
type WeightData struct {
	Name  string
	Type  gguf.Type
	Shape []int64
	Data  []byte
	// Mapped says Data lies in a read-only file mapping: a backend that
	// keeps its own copy (repacked or uploaded) may release those pages
	// (madvise) to keep resident memory near one copy of the weights. Never
	// set for heap or embedded bytes.
	Mapped bool
}

// Tensor is a backend-owned float32 activation buffer of Rows() × Cols(),
// row-major, one row per token.
type Tensor interface {
	Name() string
	Rows() int
	Cols() int
}

// Batch is the input of one pass: the tokens at positions Pos, Pos+1, ….
type Batch struct {
	Tokens []int32
	Pos    int
	// Steps says each token stands for a decoding step of its own (a pass
	// that verifies drafted tokens): the products whose rounding llama.cpp
	// lets depend on how many tokens share them (attention, the repacked
	// and f16 matmuls) round every token as a pass of that one token
	// would, so the pass gives plain decoding's logits to the bit.
	Steps bool
}

// KVSpec sizes a KV cache: for each of Layers layers, Context positions of
// KVHeads × HeadDim values each for K and for V, stored as KVTypes says
// (the zero value: f16 for both).
type KVSpec struct {
	Layers  int
	Context int
	KVHeads int
	HeadDim int
	KVTypes
}

// Bytes is the cache's size in memory.
func (s KVSpec) Bytes() int64 { return int64(s.Context) * s.BytesPerPosition() }

// BytesPerPosition is what one position of K and V takes over the layers.
func (s KVSpec) BytesPerPosition() int64 {
	return int64(s.Layers) * int64(s.KVHeads) * (s.K.RowBytes(s.HeadDim) + s.V.RowBytes(s.HeadDim))
}

// Check refuses a spec a cache cannot be made of: a non-positive size, an
// unknown type, or a head size a quantized type cannot block.
func (s KVSpec) Check() error {
	if s.Layers <= 0 || s.Context <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0 {
		return fmt.Errorf("%w: KV cache %+v", ErrBadShape, s)
	}
	return s.KVTypes.check(s.HeadDim)
}

// Attn describes the attention of one layer.
type Attn struct {
	Heads   int     // query heads
	KVHeads int     // key/value heads; Heads is a multiple of it
	HeadDim int     // values per head (key_length = value_length for qwen3)
	Scale   float32 // 1/sqrt(HeadDim) for qwen3, as llama.cpp's kq_scale
	// Window is the sliding window (gemma3's local layers): a query at
	// position p sees p−Window+1 … p; 0 sees every position.
	Window int
}

// First is the first position a query at position p sees.
func (a Attn) First(p int) int {
	if a.Window > 0 && p >= a.Window {
		return p - a.Window + 1
	}
	return 0
}

// BackendOptions configures a backend when it is created.
type BackendOptions struct {
	// Threads is the CPU worker count; 0 means one per core.
	Threads int
	// Profile turns phase timing on from the start.
	Profile bool
	// Adapter selects the GPU adapter (a substring of its name, or its
	// index as listed); empty picks the backend's default. The CPU ignores
	// it.
	Adapter string
	// GPU holds the GPU backend's own settings; the CPU ignores them.
	GPU GPUOptions
	// Auto is set when "auto" asks for the backend: a GPU backend should
	// then decline with ErrBackendUnavailable when its adapter is a software
	// rasterizer (llvmpipe, lavapipe, SwiftShader), slower than the CPU
	// backend, so that auto falls back to the CPU.
	Auto bool
}

// GPUOptions are the GPU backend's settings beyond the adapter. Programs
// fill them (bonsai from BONSAI_GPU_SOFTWARE and BONSAI_GPU_LOG); the
// backend reads no environment. The kernels are the backend's choice, by
// weight type, shape and the adapter's limits.
type GPUOptions struct {
	// AllowSoftware admits CPU-emulated adapters (lavapipe, llvmpipe)
	// without an adapter being named; they are slower than the CPU backend.
	AllowSoftware bool
	// Debug turns the WebGPU implementation's log up to debug level.
	Debug bool
}

// Warming is implemented by a backend that compiles its kernels on first
// use (the GPU: a pipeline takes ~0.2 s): Load then runs prompt passes of
// WarmBatches tokens (where its prompt kernels change with the batch),
// one-token passes at WarmPositions (where its decode kernels change with
// the sequence's length), a chained greedy pass or two at each and a
// chained sampled pass or two, so that the first reply does not wait on
// compiles. On an H100 the first reply of a fresh process decoded at 120
// tok/s, later ones at 375.
type Warming interface {
	WarmPositions() []int
	WarmBatches() []int
}

// ChainedArgmax is implemented by a backend that can decode greedily with
// the host off the critical path (a Chain, infer/slots's chained steps): in chained mode a
// one-token pass's Argmax also becomes, on the device, the token of a next
// pass begun after ChainToken, and Commit returns once the pass is
// submitted, with the previous chained pass's Argmax destination filled;
// the last one's is filled by SetChained(false).
type ChainedArgmax interface {
	// SetChained turns chained mode on or off; off waits for the pass in
	// flight and fills its Argmax destination.
	SetChained(on bool) error
	// ChainToken makes the next Begin's single token the one the last
	// chained pass's Argmax left on the device; the batch's token is then
	// a placeholder.
	ChainToken()
	// ChainEmbeds reports whether a chained pass can embed its token from
	// the embedding matrix w on the device.
	ChainEmbeds(w Weight) bool
}

// ChainedSampler is implemented by a backend that can also chain sampled
// decoding (Sequence.NewSampledChain): a chained one-token pass ends with
// its logits' top-k in place of Argmax, and the next pass, begun after
// ChainPick and encoded while the previous one runs, gets its token at its
// Commit from the host's pick over those candidates, before anything of
// it runs. SetChained(false) drops the last pass's candidates.
type ChainedSampler interface {
	ChainedArgmax
	// ChainTopK ends a chained one-token pass with the k best (id, logit)
	// of t's last row: logit descending, lower id first on ties.
	ChainTopK(t Tensor, k int)
	// ChainPick makes the next Begin's single token the one pick returns,
	// in that pass's Commit, from the last chained pass's top-k; when its
	// row held a NaN (the order is then not defined) top is nil and row
	// the whole row. The batch's token is a placeholder.
	ChainPick(pick func(top []sample.Logit, row []float32) (int32, error))
	// MaxChainTopK is the largest k ChainTopK takes.
	MaxChainTopK() int
}

// BackendInfo describes where a backend runs (engine.ModelInfo's fields).
type BackendInfo struct {
	Name    string   // "cpu", "gpu"
	Adapter string   // GPU adapter and driver; the CPU model on cpu
	Threads int      // CPU worker threads (the host threads on gpu)
	SIMD    string   // "avx512-vnni", "avx2", "generic"; empty on gpu
	Details []string // backend specifics (limits, memory estimate), one line each
}

// BackendMemory is what a backend holds, in bytes.
type BackendMemory struct {
	// Weights: bytes of bound weights. On the CPU they are the file's
	// mapping, referred to and not copied; on the GPU, device memory.
	Weights int64
	// Repacked: extra copies a fast kernel made of weights (CPU heap).
	Repacked int64
	// Activations: the Tensors' buffers.
	Activations int64
	// KV: the allocated KV cache (KVSpec.Bytes).
	KV int64
	// Recurrent: the recurrent layers' state as the backend holds it, 0
	// where it holds RecurrentSpec.Bytes: more on a GPU whose chained
	// passes keep a twin of each layer's state (to take a step back).
	Recurrent int64
}
