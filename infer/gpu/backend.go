package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/quant"
	"github.com/bonsai-chat/bonsai/shaders"
	"github.com/cogentcore/webgpu/wgpu"
)

// MatVecKernels are the names infer.GPUOptions.MatVec takes for the decode
// Q1_0 matvec: auto (the default, also ""): q1_xq where the activations
// come rounded to Q8_0 by their producer (RMSNorm, SwiGLU as gate/up's
// epilogue, attention's last pass; xqOK) with the rounded row's lookup
// table (every such producer also writes one, shaders/q8_tab.wgsli: a
// word's 32 weights are eight table entries instead of 32 tested adds, the
// same bits; H200 run 19: 8B decode 358 → 427 tok/s), else w1 (one row per thread,
// q1_w1.wgsl, rounding x per workgroup) for matrices of up to w1MaxRows
// rows without a fused SwiGLU input where the shape allows, else as
// auto1; auto1: the previous default, select for small matrices and popc
// for big ones, x never pre-rounded; select, lut, popc (16 rows per
// workgroup), popc32 / popc64 (32 or 64 rows: the bit planes of x built
// once per 32 or 64 rows instead of 16), auto32 / auto64 (auto1 with
// popc32 / popc64 for the big matrices); w1 (as auto, select where it
// cannot); xq8 / xq16 / xq32, xqs, xqe256 / xqe1024: auto with another
// q1_xq shape (xqOptions) and its tested adds instead of the tables, kept
// to compare shapes on a device; xq: auto with the tested adds; tab8 /
// tab16 / tab32: auto with that many rows per workgroup; tabh16 / tabh32:
// auto with that many for matrices of at least bigRows rows (the head);
// tabbal: auto with K's blocks split evenly over the slices (xqShape).
var MatVecKernels = []string{"auto", "auto1", "w1", "select", "lut", "popc", "popc32", "popc64", "auto32", "auto64",
	"xq", "xq8", "xq16", "xq32", "xqs", "xqe256", "xqe1024", "tab8", "tab16", "tab32", "tabh16", "tabh32", "tabbal"}

// bigRows is where MatVec tabh16 / tabh32 change q1_xq's shape: output
// heads (151,936 rows) and nothing in a layer.
const bigRows = 65536

// FuseLevels are the names infer.GPUOptions.Fuse takes (docs/gpu-kernels.md
// v5): "off" encodes every op as its own dispatch; the default ("") folds
// SwiGLU into the down matvec, q/k norm+RoPE+KV store into one dispatch and
// single-split attention into one; "all" also folds the token RMSNorms into
// the q/k/v and gate/up matvecs, which cut 2 dispatches per layer but
// measured slower on the H200 (every workgroup recomputing Σx² cost more
// than the separate norm). All must agree: TestFusedDecodeMatchesUnfused.
var FuseLevels = []string{"", "off", "all"}

// AttnKinds are the names infer.GPUOptions.Attn takes for decode
// attention: "latlong" (the default, also ""; below), or "split": attn_qk, attn_pv and attn_sum
// over splits of the cache per kv head (qk_rope_store and attn_one while
// one split holds the sequence); "head": while the sequence fits
// headMaxPos (and the workgroup memory), the layer's q/k norm+RoPE, KV
// store and attention in one dispatch of one workgroup per query head
// (attn_head.wgsl), else as split; "headlong": head up to as many
// positions as the workgroup memory holds. One dispatch instead of three
// measured slower on the H200 (8B decode attention 1,416 against 1,044 µs
// per token after 16 positions, 2,761 against 1,248 after 768): 32
// workgroups, one per query head, each walking the whole cache, leave most
// of its 132 SMs idle, where the splits spread the same reads over many.
//
// "lat": while the sequence fits latMaxPos, the same layer's work in one
// dispatch of one workgroup per query head built for latency
// (attn_lat.wgsl: 256 threads as positions × slices of the head, no long
// serial chain per thread), else as split; "latlong": lat up to
// latLongMaxPos. latlong is the default since GPU run 9 on the H200 (tg128,
// bonsai bench: 8B 277 against split's 229 tok/s, 1.7B 440 against 350;
// chained greedy 354 against 306 and 598 against 537); its pipelines, one
// per power of two of 32-position rounds, compile on first use (~0.2 s
// each), as split's do.
var AttnKinds = []string{"split", "head", "headlong", "lat", "latlong"}

// headMaxPos is the longest sequence attention kind "head" takes in
// one workgroup per query head: past it the split passes' many
// workgroups read the cache faster than a few long ones (a guess from the
// H200's 132 SMs: 32 heads × 1024 positions is 256 KiB of K and V per
// workgroup).
const headMaxPos = 1024

// ErrBadOption is returned by New for a MatVec, Fuse, Attn or Gemm name it does not know.
var ErrBadOption = errors.New("unknown GPU option value")

func checkGPUOptions(o infer.GPUOptions) error {
	if o.MatVec != "" && !slices.Contains(MatVecKernels, o.MatVec) {
		return fmt.Errorf("gpu: matvec %q (want one of %q): %w", o.MatVec, MatVecKernels, ErrBadOption)
	}
	if !slices.Contains(FuseLevels, o.Fuse) {
		return fmt.Errorf("gpu: fuse %q (want one of %q): %w", o.Fuse, FuseLevels, ErrBadOption)
	}
	if o.Attn != "" && !slices.Contains(AttnKinds, o.Attn) {
		return fmt.Errorf("gpu: attn %q (want one of %q): %w", o.Attn, AttnKinds, ErrBadOption)
	}
	if !slices.Contains(GemmKernels, o.Gemm) {
		return fmt.Errorf("gpu: gemm %q (want one of %q): %w", o.Gemm, GemmKernels, ErrBadOption)
	}
	_, err := parseRepeat(o.Repeat)
	return err
}

// parseRepeat reads GPUOptions.Repeat: "name=n,name=n" with known kernel
// names and 1 ≤ n ≤ 64.
func parseRepeat(s string) (map[string]int, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]int{}
	for _, item := range strings.Split(s, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 1 || n > 64 || !shaders.Has(name) {
			return nil, fmt.Errorf("gpu: repeat %q (want kernel=n with a kernel name and 1 ≤ n ≤ 64): %w", item, ErrBadOption)
		}
		m[name] = n
	}
	return m, nil
}

// popcMinWeights is where auto switches from q1_matvec to q1_popc: on the
// H200 popc was 20–25 % faster on 12288×4096 and 4096×12288 matvecs and
// ~4 % slower on the 6144×4096 fused q/k/v (docs/gpu-kernels.md).
const popcMinWeights = 32 << 20

// lutWorkgroupBytes is q1_lut's workgroup memory (its table and three
// 64-value vectors): more than the 32 KiB lavapipe grants, where running it
// anyway overruns the workgroup allocation.
const lutWorkgroupBytes = (8192 + 3*64) * 4

// maxBatchTokens bounds one pass's batch (the token buffer is fixed so
// bind groups never change).
const maxBatchTokens = 8192

// maxSplits bounds the split-KV attention partials per (row, head).
const maxSplits = 64

// A pass is submitted in pieces so that the GPU runs the first dispatches
// while the host still encodes the rest (wgpu costs ~2 µs of host time per
// dispatch, as much as the GPU spends on a small one): the first piece
// after firstSubmit dispatches, to start the GPU early, then every
// submitEvery. Queue order and wgpu's tracking across command buffers keep
// the pieces' dependencies.
const (
	firstSubmit = 24
	submitEvery = 64
)

func init() {
	infer.RegisterBackend("gpu", func(opts infer.BackendOptions) (infer.Backend, error) {
		// Naming an adapter is asking for it, software or not.
		b, err := New(DeviceOptions{Adapter: opts.Adapter, AllowSoftware: opts.Adapter != "" || opts.GPU.AllowSoftware, Debug: opts.GPU.Debug}, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", infer.ErrBackendUnavailable, err)
		}
		return b, nil
	})
}

// Backend implements infer.Backend on a WebGPU device: ops between Begin
// and Commit are recorded into one command encoder and submitted at Commit.
// Each distinct op (kernel, operands) gets its pipeline and bind group once;
// later passes only re-encode, so a pass allocates no device memory.
type Backend struct {
	d       *Device
	opts    infer.BackendOptions
	weights map[string]*weight
	tensors []*tensor
	kv      *kvCache
	rec     *recurrent
	// Q1_0 weights loaded but not yet on the device, and the arenas of
	// those that are.
	unplaced []*weight
	arenas   []*wgpu.Buffer
	// the op list (oplist.go): the fusing decode ops recorded and not yet
	// planned, the values waiting from earlier lists, fuse's rules for
	// the pass, and the arrays of the plan and of encodeMatVec's matrices
	// (reused from list to list)
	opList    []node
	live      []value
	fuseRules fuseRules
	plan      []step
	mvs       []pendingMatMul
	// gemm picks the prompt passes' Q1_0 GEMM (GemmKernels)
	gemm string
	// dispatches encoded in the pass in progress, and in the last one
	dispatches, lastDispatches int
	// rounded says x.scratch holds x rounded in mode, and that no dispatch
	// but the matmuls reading it came after (at: the dispatch count then):
	// a second matmul of the same x (qwen35's β and α) reuses it.
	rounded struct {
		x    *tensor
		mode string
		at   int
	}
	// census: the kernels this pass dispatched (each counts its own
	// dispatches), lastCensus the last committed pass's counts; repeat is
	// GPUOptions.Repeat, set on each kernel as it is first dispatched
	census     []*kernel
	lastCensus []kernelCount
	repeat     map[string]int
	// dispatches encoded since the last piece of the pass was submitted
	unsubmitted int
	// submits is the number of command buffers the pass has submitted
	submits int
	// matvec picks the decode Q1_0 kernel (MatVecKernels): "auto", "select"
	// (q1_matvec), "lut" (q1_lut, where K is a multiple of 2048) or "popc"
	// (q1_popc). docs/gpu-kernels.md has their H200 timings.
	matvec string
	noFuse bool // Fuse "off": no fusion
	// headMax is the longest decode sequence attn_head takes (0: never,
	// Attn "split"); it is further bounded by the workgroup memory
	// (attnHeadSlots)
	headMax int
	// latMax is the longest decode sequence attn_lat takes (0: never)
	latMax int
	// q1_xq's shape: rows per workgroup (0: by K), SwiGLU as its own
	// act_q8 dispatch instead of gate/up's epilogue, the epilogue's
	// workgroup size
	xqRPW    int
	xqBigRPW int // the same for matrices of bigRows rows and more
	// xqEven: slices that divide K's blocks evenly where K allows
	// (MatVec tabbal)
	xqEven   bool
	xqSepGLU bool
	xqGLUWG  int
	// tab: rounded rows come with their lookup tables (tensor.xtab) and
	// q1_xq reads those (MatVec auto and tab*)
	tab bool
	// deltaChunkMin is the batch from which DeltaNet runs chunked
	deltaChunkMin int
	fuseNorm      bool // Fuse "all": token RMSNorms folded into matvecs
	ropes         map[infer.Rope]*wgpu.Buffer
	ops           map[opKey]*op

	batchBuf  *wgpu.Buffer // uniform {n, pos, splits, chunk}
	tokensBuf *wgpu.Buffer

	// the pass in progress
	enc     *wgpu.CommandEncoder
	pass    *wgpu.ComputePassEncoder
	batch   infer.Batch
	n       int
	splits  int
	err     error
	reads   []pendingRead
	touched []*tensor // tensors read in this pass
	phase   profile.Phase

	prof profiler

	chain chain
	topKs map[opKey]*topK // prepared top-ks (topk.go)
}

type tensor struct {
	name       string
	rows, cols int
	buf        *wgpu.Buffer
	scratch    *wgpu.Buffer   // activations rounded to a vec-dot type
	part       *wgpu.Buffer   // split attention partials (q tensors)
	scores     *wgpu.Buffer   // decode attention's scaled scores, heads × context (q tensors)
	stats      *wgpu.Buffer   // split attention (max, Σexp) per split
	stagings   []*wgpu.Buffer // MapRead copies for Read, one per Read of a pass
	passReads  int
	argmax     *wgpu.Buffer
	argStaging *wgpu.Buffer
	embedRows  *wgpu.Buffer // CPU-dequantized embedding rows
	tmp        *wgpu.Buffer // a copy of the tensor for ops that read it while writing it
	xq, xqSum  *wgpu.Buffer // the tensor's Q8_0 rounding (values, Σ per 32), written by its producer for q1_xq
	xtab       *wgpu.Buffer // with Backend.tab, that rounding's lookup table (16 f32 per 4 values of row 0)
	prep       *wgpu.Buffer // chunked DeltaNet's per-chunk matrices (DeltaNet dst)
}

func (t *tensor) Name() string { return t.name }
func (t *tensor) Rows() int    { return t.rows }
func (t *tensor) Cols() int    { return t.cols }

type kvCache struct {
	spec infer.KVSpec
	k, v *wgpu.Buffer
}

type pendingMatMul struct {
	dst *tensor
	w   *weight
}

type pendingRead struct {
	staging *wgpu.Buffer
	bytes   int
	floats  []float32
	ints    []int32
}

// op is a prepared dispatch: pipeline plus bind group, and the buffers the
// bind group holds (an op is dropped with any of them: dropOps).
type op struct {
	k    *kernel
	bg   *wgpu.BindGroup
	bufs []*wgpu.Buffer
}

// binds reports whether o's bind group holds buf.
func (o *op) binds(buf *wgpu.Buffer) bool {
	for _, b := range o.bufs {
		if b == buf {
			return true
		}
	}
	return false
}

// dropOps forgets the prepared ops that bind any of bufs, before those
// buffers are released or replaced.
func (b *Backend) dropOps(bufs ...*wgpu.Buffer) {
	b.dropOpsWhere(func(o *op) bool {
		for _, buf := range bufs {
			if buf != nil && o.binds(buf) {
				return true
			}
		}
		return false
	})
}

// dropOpsWhere forgets the prepared ops stale reports.
func (b *Backend) dropOpsWhere(stale func(*op) bool) {
	for k, o := range b.ops {
		if stale(o) {
			o.bg.Release()
			delete(b.ops, k)
		}
	}
}

// opKey identifies an op by kernel variant and operands (pointers), so a
// forward pass finds its prepared dispatches without building strings.
type opKey struct {
	kind             string
	a, b, c, d, e, g any
	i                int
	f                float32
	v                keyVariant
}

// keyVariant tells a matvec group's variants apart in its opKey (flags,
// not strings built per dispatch, which would allocate).
type keyVariant uint8

const (
	keyNormIn keyVariant = 1 << iota // the x load computes a norm
	keyGLUIn                         // the x load computes SwiGLU
	keyW1                            // q1_w1
	keyXQ                            // q1_xq
	keyXQGLU                         // q1_xq with the SwiGLU epilogue
)

// New opens a device and returns an empty backend; opts.GPU chooses the
// kernels (its AllowSoftware and Debug are dopts' business).
func New(dopts DeviceOptions, opts infer.BackendOptions) (*Backend, error) {
	if err := checkGPUOptions(opts.GPU); err != nil {
		return nil, err
	}
	matvec := opts.GPU.MatVec
	if matvec == "" {
		matvec = "auto"
	}
	d, err := OpenDevice(dopts)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		d:        d,
		opts:     opts,
		weights:  map[string]*weight{},
		ropes:    map[infer.Rope]*wgpu.Buffer{},
		ops:      map[opKey]*op{},
		matvec:   matvec,
		noFuse:   opts.GPU.Fuse == "off",
		fuseNorm: opts.GPU.Fuse == "all",
		headMax:  0,
		gemm:     opts.GPU.Gemm,

		deltaChunkMin: DefaultDeltaChunkMin,
	}
	b.repeat, _ = parseRepeat(opts.GPU.Repeat)
	b.xqRPW, b.xqSepGLU, b.xqGLUWG = xqOptions(matvec)
	b.tab = matvec == "auto" || strings.HasPrefix(matvec, "tab")
	if strings.HasPrefix(matvec, "tabh") {
		b.xqBigRPW, _ = strconv.Atoi(matvec[4:])
	}
	b.xqEven = matvec == "tabbal"
	switch opts.GPU.Attn {
	case "head":
		b.headMax = headMaxPos
	case "headlong":
		b.headMax = maxBatchTokens
	case "lat":
		b.latMax = latMaxPos
	case "latlong", "":
		b.latMax = latLongMaxPos
	}
	if b.batchBuf, err = d.newBuffer("batch", 16, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst); err != nil {
		d.Close()
		return nil, err
	}
	if b.tokensBuf, err = d.newBuffer("tokens", 4*maxBatchTokens, storageUsage); err != nil {
		d.Close()
		return nil, err
	}
	b.SetProfiling(opts.Profile)
	return b, nil
}

func (b *Backend) Name() string { return "gpu" }

func (b *Backend) Info() infer.BackendInfo {
	l := b.d.Limits
	return infer.BackendInfo{
		Name:    "gpu",
		Adapter: b.d.Name(),
		Threads: runtime.GOMAXPROCS(0),
		Details: []string{
			fmt.Sprintf("max storage binding %d MiB, max buffer %d MiB", l.MaxStorageBufferBindingSize>>20, l.MaxBufferSize>>20),
			fmt.Sprintf("workgroup storage %d KiB, %d invocations", l.MaxComputeWorkgroupStorageSize>>10, l.MaxComputeInvocationsPerWorkgroup),
			fmt.Sprintf("timestamp queries: %v", b.d.Timestamps),
			"Q1_0 native (repacked sign words); Q2_0, PQ2_0, PTQ1_0 native (2-bit codes); other types dequantized to f32 at load",
		},
	}
}

func (b *Backend) LoadWeight(wd infer.WeightData) (infer.Weight, error) {
	if w, ok := b.weights[wd.Name]; ok {
		return w, nil
	}
	w, err := loadWeight(b.d, wd)
	if err != nil {
		return nil, err
	}
	b.weights[wd.Name] = w
	if w.q1() {
		b.unplaced = append(b.unplaced, w)
	}
	return w, nil
}

func (b *Backend) NewTensor(name string, rows, cols int) (infer.Tensor, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("gpu: tensor %s: %d×%d: %w", name, rows, cols, infer.ErrBadShape)
	}
	buf, err := b.d.newBuffer(name, uint64(rows*cols*4), storageUsage)
	if err != nil {
		return nil, err
	}
	t := &tensor{name: name, rows: rows, cols: cols, buf: buf}
	b.tensors = append(b.tensors, t)
	return t, nil
}

func (b *Backend) NewKVCache(spec infer.KVSpec) error {
	if spec.Layers <= 0 || spec.Context <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.HeadDim%2 != 0 {
		return fmt.Errorf("gpu: KV cache %+v: %w", spec, infer.ErrBadShape)
	}
	if b.kv != nil {
		// Every op binding the old cache is stale. For a cache of
		// another size, so are the RoPE angle tables, which span the old
		// context, and every op whose kernel bakes the old context into
		// its offsets, whatever it binds.
		b.dropOps(b.kv.k, b.kv.v)
		if b.kv.spec.Context != spec.Context {
			for r, t := range b.ropes {
				b.dropOps(t)
				t.Release()
				delete(b.ropes, r)
			}
			b.dropOpsWhere(func(o *op) bool { return o.k.context != 0 })
		}
		b.kv.k.Release()
		b.kv.v.Release()
		b.kv = nil
	}
	half := uint64(spec.Bytes() / 2)
	if half > b.d.Limits.MaxStorageBufferBindingSize {
		return fmt.Errorf("gpu: KV cache of %d MiB per K/V exceeds the %d MiB storage binding: %w",
			half>>20, b.d.Limits.MaxStorageBufferBindingSize>>20, ErrOutOfMemory)
	}
	k, err := b.d.newBuffer("kcache", half, storageUsage)
	if err != nil {
		return err
	}
	v, err := b.d.newBuffer("vcache", half, storageUsage)
	if err != nil {
		k.Release()
		return err
	}
	b.kv = &kvCache{spec: spec, k: k, v: v}
	return nil
}

// fail keeps the first error of the pass.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Backend) Begin(batch infer.Batch) {
	b.err = nil
	b.reads = b.reads[:0]
	for _, t := range b.touched {
		t.passReads = 0
	}
	b.touched = b.touched[:0]
	b.opList, b.live = b.opList[:0], b.live[:0]
	b.dispatches, b.unsubmitted, b.submits = 0, 0, 0
	b.rounded.x = nil
	for _, k := range b.census {
		k.passDispatches = 0
	}
	b.census = b.census[:0]
	b.batch = batch
	b.n = len(batch.Tokens)
	b.phase = profile.Embed
	switch {
	case b.n == 0:
		b.fail(fmt.Errorf("gpu: empty batch: %w", infer.ErrBadShape))
	case b.n > maxBatchTokens:
		b.fail(fmt.Errorf("gpu: batch of %d tokens exceeds %d: %w", b.n, maxBatchTokens, infer.ErrBadShape))
	case batch.Pos < 0:
		b.fail(fmt.Errorf("gpu: negative position %d: %w", batch.Pos, infer.ErrBadShape))
	case b.kv != nil && batch.Pos+b.n > b.kv.spec.Context:
		b.fail(fmt.Errorf("gpu: positions %d..%d past the %d-token cache: %w", batch.Pos, batch.Pos+b.n-1, b.kv.spec.Context, infer.ErrContextFull))
	}
	if b.err != nil {
		return
	}
	if len(b.unplaced) > 0 {
		bufs, err := placeQ1(b.d, b.unplaced)
		b.arenas = append(b.arenas, bufs...)
		if err != nil {
			b.fail(err)
			return
		}
		b.unplaced = nil
	}
	// Decode spreads the cache over up to maxSplits workgroups per kv head
	// (at least 32 positions each); prefill has parallelism in its rows.
	seq := batch.Pos + b.n
	chunk := seq
	if b.n == 1 {
		chunk = max(32, ceilDiv(seq, maxSplits))
	}
	b.splits = ceilDiv(seq, chunk)
	b.fuseRules = b.passRules()
	var u [16]byte
	binary.LittleEndian.PutUint32(u[0:], uint32(b.n))
	binary.LittleEndian.PutUint32(u[4:], uint32(batch.Pos))
	binary.LittleEndian.PutUint32(u[8:], uint32(b.splits))
	binary.LittleEndian.PutUint32(u[12:], uint32(chunk))
	if err := b.d.queue.WriteBuffer(b.batchBuf, 0, u[:]); err != nil {
		b.fail(fmt.Errorf("gpu: writing batch: %w", err))
		return
	}
	b.chain.pass, b.chain.tokens = nil, b.chain.fromDevice && b.n == 1
	b.chain.fromDevice = false
	b.chain.beginPicking(b.n)
	if b.chain.tokens || b.chain.picking {
		// the last chained pass's Argmax copied the token in
		b.beginEncoder()
		return
	}
	toks := make([]byte, 4*b.n)
	for i, t := range batch.Tokens {
		binary.LittleEndian.PutUint32(toks[4*i:], uint32(t))
	}
	if err := b.d.queue.WriteBuffer(b.tokensBuf, 0, toks); err != nil {
		b.fail(fmt.Errorf("gpu: writing tokens: %w", err))
		return
	}
	b.beginEncoder()
}

// beginEncoder opens the pass's command encoder and first compute pass.
func (b *Backend) beginEncoder() {
	enc, err := b.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		b.fail(fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err))
		return
	}
	b.enc = enc
	b.prof.begin(b)
	b.beginPass()
}

func (b *Backend) beginPass() {
	b.pass = b.enc.BeginComputePass(nil)
}

func (b *Backend) endPass() {
	if b.pass == nil {
		return
	}
	if err := b.pass.End(); err != nil {
		b.fail(fmt.Errorf("gpu: encoding: %w", err))
	}
	b.pass.Release()
	b.pass = nil
}

func (b *Backend) Commit() error {
	defer func() {
		b.reads = b.reads[:0]
		b.err = nil
		b.chain.dropHeld()
	}()
	if b.enc == nil {
		if b.err != nil {
			return b.err
		}
		return errors.New("gpu: Commit without Begin")
	}
	b.endOps()
	b.endPass()
	b.lastDispatches = b.dispatches
	b.lastCensus = b.lastCensus[:0]
	for _, k := range b.census {
		b.lastCensus = append(b.lastCensus, kernelCount{k.name, k.passDispatches})
	}
	b.prof.end(b)
	enc := b.enc
	b.enc = nil
	if b.err != nil {
		enc.Release()
		return b.err
	}
	cmd, err := enc.Finish(nil)
	enc.Release()
	if err != nil {
		return fmt.Errorf("gpu: finishing the pass: %w", err)
	}
	if err := b.chainPick(); err != nil {
		cmd.Release()
		return err
	}
	start := time.Now()
	b.d.queue.Submit(cmd)
	cmd.Release()
	if b.chain.submittedCandidates() && len(b.reads) == 0 && !b.prof.active() {
		return nil
	}
	if p := b.chain.pass; p != nil {
		// A chained pass: the previous one's token is read back while
		// this one runs, this one's at the next Commit.
		b.chain.pass = nil
		if err := b.chainDrain(); err != nil {
			return err
		}
		b.chain.pending = p
		if len(b.reads) == 0 && !b.prof.active() {
			return nil
		}
	}
	// Wait for the pass before mapping anything (see bonsai_poll_until for
	// why never through a blocking poll).
	if err := waitIdle(b.d.dev); err != nil {
		return err
	}
	var scratch []byte
	for _, r := range b.reads {
		if cap(scratch) < r.bytes {
			scratch = make([]byte, r.bytes)
		}
		s := scratch[:r.bytes]
		if err := readBuffer(b.d.dev, r.staging, 0, s); err != nil {
			return err
		}
		if r.floats != nil {
			bytesToFloats(s, r.floats)
		} else {
			for i := range r.ints {
				r.ints[i] = int32(binary.LittleEndian.Uint32(s[4*i:]))
			}
		}
	}
	if err := b.prof.collect(b, time.Since(start)); err != nil {
		return err
	}
	// a chained pass that had to wait anyway
	return b.chainDrain()
}

func (b *Backend) Phase(p profile.Phase) {
	if b.err != nil || b.enc == nil {
		return
	}
	// a node: the values waiting (a norm+RoPE for its StoreKV) wait
	// across it, and a fused dispatch is timed in the phase it lands in
	b.record(node{op: opPhase, phase: p})
}

// active is the number of rows an op acts on for a tensor.
func (b *Backend) active(t *tensor) int { return min(t.rows, b.n) }

// prepared returns the op for key, creating it with make on first use.
func (b *Backend) prepared(key opKey, make func() (*kernel, []binding, error)) *op {
	if o, ok := b.ops[key]; ok {
		return o
	}
	k, bufs, err := make()
	if err != nil {
		b.fail(err)
		return nil
	}
	bg, err := b.d.bindGroup(k, bufs...)
	if err != nil {
		b.fail(err)
		return nil
	}
	o := &op{k: k, bg: bg}
	for _, bb := range bufs {
		o.bufs = append(o.bufs, bb.buf)
	}
	b.ops[key] = o
	return o
}

func (b *Backend) dispatch(o *op, x, y, z int) {
	if o == nil || b.err != nil || x == 0 || y == 0 || z == 0 {
		return
	}
	b.pass.SetPipeline(o.k.pipe)
	b.pass.SetBindGroup(0, o.bg, nil)
	b.pass.DispatchWorkgroups(uint32(x), uint32(y), uint32(z))
	b.dispatches++
	b.unsubmitted++
	if o.k.passDispatches == 0 {
		b.census = append(b.census, o.k)
		o.k.repeat = b.repeat[o.k.name]
	}
	o.k.passDispatches++
	for i := 1; i < o.k.repeat; i++ {
		b.pass.DispatchWorkgroups(uint32(x), uint32(y), uint32(z))
		b.dispatches++
	}
	// Profiling times the GPU's phases: one piece, so that no phase
	// includes the GPU waiting for the host's next one.
	if !b.prof.active() && (b.unsubmitted >= submitEvery || b.submits == 0 && b.unsubmitted >= firstSubmit) {
		b.submitPiece()
	}
}

// submitPiece submits what the pass has encoded so far and goes on in a
// new command encoder.
func (b *Backend) submitPiece() {
	b.endPass()
	if b.err != nil {
		return
	}
	cmd, err := b.enc.Finish(nil)
	b.enc.Release()
	b.enc = nil
	if err != nil {
		b.fail(fmt.Errorf("gpu: finishing the pass: %w", err))
		return
	}
	b.submitOrHold(cmd)
	b.submits++
	b.unsubmitted = 0
	enc, err := b.d.dev.CreateCommandEncoder(nil)
	if err != nil {
		b.fail(fmt.Errorf("gpu: %w: %w", ErrDeviceLost, err))
		return
	}
	b.enc = enc
	b.beginPass()
}

// LastDispatches is the number of compute dispatches the last committed
// pass encoded (fusion is what lowers it; tests and `bonsai gpu` report it).
func (b *Backend) LastDispatches() int { return b.lastDispatches }

// kernelCount is one kernel's dispatches in a pass.
type kernelCount struct {
	name string
	n    int
}

// LastCensus is the last committed pass's dispatches per kernel name
// (without Repeat's copies).
func (b *Backend) LastCensus() map[string]int {
	m := make(map[string]int, len(b.lastCensus))
	for _, c := range b.lastCensus {
		m[c.name] += c.n
	}
	return m
}

// ready reports whether ops can be encoded now, after encoding the op
// list (every op outside the list calls it).
func (b *Backend) ready() bool {
	if b.err != nil || b.enc == nil {
		return false
	}
	b.flushOps()
	return b.err == nil
}

// tensorArg is an operand of an op outside the list that may read or
// write it: the values defining it or reading it are computed first.
func (b *Backend) tensorArg(name string, t infer.Tensor) *tensor {
	gt := b.asTensor(name, t)
	if gt != nil {
		b.touch(gt)
	}
	return gt
}

func (b *Backend) asTensor(name string, t infer.Tensor) *tensor {
	gt, ok := t.(*tensor)
	if !ok || gt == nil {
		b.fail(fmt.Errorf("gpu: %s: not a GPU tensor: %w", name, infer.ErrBadShape))
		return nil
	}
	return gt
}

func (b *Backend) weightArg(name string, w infer.Weight) *weight {
	gw, ok := w.(*weight)
	if !ok || gw == nil {
		b.fail(fmt.Errorf("gpu: %s: not a GPU weight: %w", name, infer.ErrBadShape))
		return nil
	}
	return gw
}

func (b *Backend) shapeErr(format string, args ...any) {
	b.fail(fmt.Errorf("gpu: "+format+": %w", append(args, infer.ErrBadShape)...))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (b *Backend) Embed(dstT infer.Tensor, wI infer.Weight) {
	if !b.ready() {
		return
	}
	dst, w := b.tensorArg("Embed dst", dstT), b.weightArg("Embed", wI)
	if dst == nil || w == nil {
		return
	}
	if dst.cols != w.k {
		b.shapeErr("Embed: dst has %d columns, %s rows have %d", dst.cols, w.name, w.k)
		return
	}
	for _, t := range b.batch.Tokens {
		if t < 0 || int(t) >= w.m {
			b.shapeErr("Embed: token %d outside the vocabulary of %d", t, w.m)
			return
		}
	}
	n := b.active(dst)
	if b.chain.tokens && !w.q1() {
		b.fail(fmt.Errorf("gpu: chained decoding with %s embeddings: %w", w.name, ErrUnsupported))
		return
	}
	if w.q1() {
		o := b.prepared(opKey{kind: "embed", a: dst, b: w}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("embed", q1Layout(map[string]shaders.Const{
				"K": shaders.U32(w.k), "VOCAB": shaders.U32(w.m), "XROWS": shaders.U32(dst.rows), "Q1": shaders.Flag(true)}, w.interleaved, w.m))
			return k, []binding{whole(b.batchBuf), whole(b.tokensBuf), w.bits.binding(), w.scales.binding(), whole(dst.buf)}, err
		})
		b.dispatch(o, ceilDiv(w.k, 256), n, 1)
		return
	}
	// Other types: dequantize the few rows on the CPU (the file's bytes
	// stay mapped) and copy them in order with the pass.
	if dst.embedRows == nil {
		buf, err := b.d.newBuffer(dst.name+".embed", uint64(dst.rows*dst.cols*4), storageUsage)
		if err != nil {
			b.fail(err)
			return
		}
		dst.embedRows = buf
	}
	rows := make([]byte, n*w.k*4)
	if err := w.embedRows(b.batch.Tokens[:n], rows); err != nil {
		b.fail(err)
		return
	}
	if err := b.d.queue.WriteBuffer(dst.embedRows, 0, rows); err != nil {
		b.fail(fmt.Errorf("gpu: writing embeddings: %w", err))
		return
	}
	o := b.prepared(opKey{kind: "embedcopy", a: dst}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("elementwise", map[string]shaders.Const{
			"COLS": shaders.U32(dst.cols), "XROWS": shaders.U32(dst.rows), "ALIAS_A": shaders.Flag(true), "COPY": shaders.Flag(true)})
		return k, []binding{whole(b.batchBuf), whole(dst.embedRows), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(dst.cols, 256), n, 1)
}

func (b *Backend) MatMul(dstT infer.Tensor, wI infer.Weight, xT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, w, x := b.asTensor("MatMul dst", dstT), b.weightArg("MatMul", wI), b.asTensor("MatMul x", xT)
	if dst == nil || w == nil || x == nil {
		return
	}
	if x.cols != w.k || dst.cols != w.m {
		b.shapeErr("MatMul: %s is %d×%d, x has %d columns and dst %d", w.name, w.m, w.k, x.cols, dst.cols)
		return
	}
	if dst == x {
		b.shapeErr("MatMul: dst %s aliases x", dst.name)
		return
	}
	rows := min(x.rows, dst.rows)
	n := min(rows, b.n)
	decode := n == 1
	if decode && w.q1() && w.m%8 == 0 {
		// fuse joins it with its neighbours (fuse.go)
		b.record(node{op: opMatVec, dst: dst, x: x, w: w})
		return
	}
	b.touch(x)
	b.touch(dst)
	rpw, tt, wg := 4, 8, 64
	if decode {
		rpw, tt = 8, 1
		wg = 128
	}
	if sh, ok := b.lutFor(w, n, rows); ok {
		b.lutGemm(dst, w, x, rows, n, sh)
		return
	}
	if t, ok := b.gemmTile(w, n); ok {
		xq := b.roundActivations(x, w, rows, n)
		if xq == nil {
			return
		}
		o := b.prepared(opKey{kind: "q1gemm2", a: dst, b: w, c: x, i: t.rm*4 + t.rn}, func() (*kernel, []binding, error) {
			bm, bn := 64*t.rm, 64*t.rn
			k, err := b.d.kernel("q1_gemm2", q1Layout(map[string]shaders.Const{
				"K": shaders.U32(w.k), "M": shaders.U32(w.m), "WORDS": shaders.U32(w.k / 32), "XROWS": shaders.U32(rows),
				"BM": shaders.U32(bm), "BN": shaders.U32(bn), "ASIZE": shaders.U32(8 * bm), "BSIZE": shaders.U32(8 * bn), "AK": shaders.U32(32 * bm / 256), "XV": shaders.U32(bn / 32),
				"RM2": shaders.Flag(t.rm == 2), "RN2": shaders.Flag(t.rn == 2)}, w.interleaved, w.m))
			return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(xq), whole(dst.buf)}, err
		})
		b.dispatch(o, ceilDiv(w.m, 64*t.rm), ceilDiv(n, 64*t.rn), 1)
		return
	}
	if w.q1() && w.m%64 == 0 {
		xq := b.roundActivations(x, w, rows, n)
		if xq == nil {
			return
		}
		o := b.prepared(opKey{kind: "q1gemm", a: dst, b: w, c: x}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("q1_gemm", q1Layout(map[string]shaders.Const{
				"K": shaders.U32(w.k), "M": shaders.U32(w.m), "WORDS": shaders.U32(w.k / 32), "XROWS": shaders.U32(rows)}, w.interleaved, w.m))
			return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(xq), whole(dst.buf)}, err
		})
		b.dispatch(o, w.m/64, ceilDiv(n, 64), 1)
		return
	}
	if w.q1() {
		words := w.k / 32
		if words < wg {
			wg = 32
			for wg*2 <= words && wg < 128 {
				wg *= 2
			}
		}
		for w.m%rpw != 0 {
			rpw /= 2
		}
		o := b.prepared(opKey{kind: "q1mm", a: dst, b: w, c: x, i: boolInt(decode)}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("q1_matmul", q1Layout(map[string]shaders.Const{
				"K": shaders.U32(w.k), "M": shaders.U32(w.m), "WORDS": shaders.U32(words), "RPW": shaders.U32(rpw),
				"TT": shaders.U32(tt), "WG": shaders.U32(wg), "XROWS": shaders.U32(rows),
				"ACC": shaders.U32(rpw * tt), "RED": shaders.U32(wg * rpw * tt)}, w.interleaved, w.m))
			return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(x.buf), whole(dst.buf)}, err
		})
		b.dispatch(o, w.m/rpw, ceilDiv(n, tt), 1)
		return
	}
	xin := b.roundActivations(x, w, rows, n)
	if xin == nil {
		return
	}
	if len(w.twoBit) > 0 {
		group, _ := twoBit(w.typ)
		for ci, c := range w.twoBit {
			crpw := rpw
			for c.rows%crpw != 0 {
				crpw /= 2
			}
			o := b.prepared(opKey{kind: "q2mm", a: dst, b: w, c: x, i: boolInt(decode) + 2*ci}, func() (*kernel, []binding, error) {
				k, err := b.d.kernel("q2_matmul", map[string]shaders.Const{
					"K": shaders.U32(w.k), "M": shaders.U32(w.m), "ROW0": shaders.U32(c.row0), "GROUP": shaders.U32(group),
					"RPW": shaders.U32(crpw), "TT": shaders.U32(tt), "WG": shaders.U32(64), "XROWS": shaders.U32(rows),
					"ACC": shaders.U32(crpw * tt), "RED": shaders.U32(64 * crpw * tt)})
				return k, []binding{whole(b.batchBuf), whole(c.codes), whole(c.scales), whole(xin), whole(dst.buf)}, err
			})
			b.dispatch(o, c.rows/crpw, ceilDiv(n, tt), 1)
		}
		if dst != x {
			b.readRounded(x)
		}
		return
	}
	for ci, c := range w.chunks {
		crpw := rpw
		for c.rows%crpw != 0 || decode && crpw > 1 && c.rows/crpw < f32DecodeGroups {
			crpw /= 2
		}
		o := b.prepared(opKey{kind: "f32mm", a: dst, b: w, c: x, i: boolInt(decode) + 2*ci}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("f32_matmul", map[string]shaders.Const{
				"K": shaders.U32(w.k), "M": shaders.U32(w.m), "ROW0": shaders.U32(c.row0), "RPW": shaders.U32(crpw),
				"TT": shaders.U32(tt), "WG": shaders.U32(64), "XROWS": shaders.U32(rows),
				"ACC": shaders.U32(crpw * tt), "RED": shaders.U32(64 * crpw * tt)})
			return k, []binding{whole(b.batchBuf), whole(c.buf), whole(xin), whole(dst.buf)}, err
		})
		b.dispatch(o, c.rows/crpw, ceilDiv(n, tt), 1)
	}
	if dst != x {
		b.readRounded(x)
	}
}

// f32DecodeGroups is the fewest workgroups a decoding step's f32 matvec
// is split into, rows per workgroup permitting: a small matrix (qwen35's
// 48-row β and α projections) in 8-row workgroups kept 6 of the H200's 132
// SMs busy. Rows per workgroup do not change a row's summation order.
const f32DecodeGroups = 256

// gemmTile is q1_gemm2's tile for a prompt pass of n tokens over w: RM ×
// 64 rows by RN × 64 tokens per workgroup. Without one (rows not a
// multiple of 4, K not of 128, workgroup memory too small, or q1_gemm
// chosen) q1_gemm or q1_matmul run.
type gemmTile struct{ rm, rn int }

// GemmKernels are the names infer.GPUOptions.Gemm takes for Q1_0 prompt
// passes: "auto" (also the default, "") q1_lutgemm's lut4s shape where it
// runs, else q1_gemm2 as "gemm2"; "gemm2" q1_gemm2 with the tile picked by
// shape; rRMxRN q1_gemm2 with a fixed tile; "tile64" q1_gemm (64 × 64 per
// workgroup, 4 × 4 per thread); lut4, lut8, lut4s, lut8s q1_lutgemm's
// shapes (lutgemm.go). On the H200 (BENCHMARKS "GPU run 21", 512 tokens)
// lut4s ran 8B at 3,951 tok/s, 1.7B at 11,050 and 27B at 1,144, the best
// shape on all three, against q1_gemm2's 1,724, 6,187 and 473; in run 9
// q1_gemm2's 128 × 64 tile (r2x1) was within 3 % of its best tile on every
// shape, q1_gemm 35–45 % slower.
var GemmKernels = []string{"", "auto", "gemm2", "tile64", "r1x1", "r2x1", "r1x2", "r2x2", "lut4", "lut8", "lut4s", "lut8s"}

func (b *Backend) gemmTile(w *weight, n int) (gemmTile, bool) {
	if !w.q1() || n < 2 || w.m%4 != 0 || w.k%128 != 0 || b.gemm == "tile64" {
		return gemmTile{}, false
	}
	t := gemmTile{2, 2}
	switch b.gemm {
	case "r1x1":
		t = gemmTile{1, 1}
	case "r2x1":
		t = gemmTile{2, 1}
	case "r1x2":
		t = gemmTile{1, 2}
	case "r2x2":
	default:
		// 128 × 64, the measured best, unless that leaves most of a big
		// GPU's SMs without a workgroup
		t = gemmTile{2, 1}
		if ceilDiv(w.m, 128)*ceilDiv(n, 64) < 128 {
			t = gemmTile{1, 1}
		}
	}
	if (t.rm+t.rn)*64*32*4 > int(b.d.Limits.MaxComputeWorkgroupStorageSize) {
		return gemmTile{}, false
	}
	return t, true
}

// normRopeThreads is norm_rope.wgsl's workgroup size for a head.
func normRopeThreads(headDim int) int {
	wg := 32
	for wg < headDim/2 && wg < 256 {
		wg *= 2
	}
	return wg
}

// normRope encodes a per-head RMSNorm and Rope in place (a vNormRope).
func (b *Backend) normRope(v value) {
	x, r, w, eps, ctx := v.dst, v.rope, v.w, v.eps, b.kv.spec.Context
	o := b.prepared(opKey{kind: "normrope", a: x, b: r, c: w, f: eps}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("norm_rope", map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "HEAD_DIM": shaders.U32(r.HeadDim), "DIMS": shaders.U32(r.Dims),
			"EPS": shaders.F32(eps), "WG": shaders.U32(normRopeThreads(r.HeadDim)), "XROWS": shaders.U32(x.rows), "CTX": shaders.U32(ctx)})
		return k, []binding{whole(b.batchBuf), whole(w.chunks[0].buf), whole(v.table), whole(x.buf)}, err
	})
	b.dispatch(o, x.cols/r.HeadDim, b.active(x), 1)
}

// qkRopeStore encodes a vQKStore, q's and k's norm+Rope with the store of
// k and v, as one qk_rope_store dispatch (fuse checked the shapes).
func (b *Backend) qkRopeStore(p value) {
	q, k, v, layer, r := p.dst, p.src, p.up, p.layer, p.rope
	s := b.kv.spec
	kvd := s.KVHeads * s.HeadDim
	kc, vc, off := b.kvBind(layer)
	o := b.prepared(opKey{kind: "qkropestore", a: q, b: k, c: v, d: p.w, e: p.kw, g: r, i: layer, f: p.eps}, func() (*kernel, []binding, error) {
		kern, err := b.d.kernel("qk_rope_store", map[string]shaders.Const{
			"QCOLS": shaders.U32(q.cols), "KVD": shaders.U32(kvd), "HEAD_DIM": shaders.U32(r.HeadDim), "DIMS": shaders.U32(r.Dims),
			"QEPS": shaders.F32(p.eps), "KEPS": shaders.F32(p.keps), "WG": shaders.U32(normRopeThreads(r.HeadDim)),
			"XROWS": shaders.U32(q.rows), "CTX": shaders.U32(s.Context), "QHEADS": shaders.U32(q.cols / r.HeadDim),
			"LAYER_OFF": shaders.U32(off)})
		return kern, []binding{whole(b.batchBuf), whole(p.w.chunks[0].buf), whole(p.kw.chunks[0].buf), whole(p.table),
			whole(q.buf), whole(k.buf), whole(v.buf), kc, vc}, err
	})
	b.dispatch(o, q.cols/r.HeadDim+s.KVHeads, b.active(q), 1)
}

// q1Layout adds to defs the layout of up to three Q1_0 matrices stored
// back to back (row-major or interleaved; their row ends), as
// shaders/q1_layout.wgsli addresses them.
func q1Layout(defs map[string]shaders.Const, interleaved bool, ends ...int) map[string]shaders.Const {
	defs["Q1IL"] = shaders.Flag(interleaved)
	m0, m1, mt := ends[0], ends[0], ends[len(ends)-1]
	if len(ends) > 1 {
		m1 = ends[1]
	}
	defs["Q1M0"], defs["Q1M1"], defs["Q1MT"] = shaders.U32(m0), shaders.U32(m1), shaders.U32(mt)
	return defs
}

// w1MaxRows is the most rows (all fused matrices) auto gives q1_w1.
const w1MaxRows = 8192

// w1 is q1_w1's shape: RPW rows × KS slices of K per workgroup, the
// activations quantized CB blocks at a time.
type w1 struct{ rpw, ks, cb int }

// w1Config picks q1_w1's shape for K and the row ends of the matrices
// (each a multiple of RPW rows): the most rows per workgroup whose KS
// slices divide a chunk of blocks that fits workgroup memory.
func (b *Backend) w1Config(k int, ends []int) (w1, bool) {
	nb := k / 128
	limit := min(int(b.d.Limits.MaxComputeWorkgroupStorageSize), 32<<10)
	for _, rpw := range []int{32, 16, 8} {
		ks := 256 / rpw
		fits := k%128 == 0
		prev := 0
		for _, e := range ends {
			fits = fits && (e-prev)%rpw == 0
			prev = e
		}
		if !fits {
			continue
		}
		for cb := min(nb, 48) / ks * ks; cb >= ks; cb -= ks {
			if nb%cb == 0 && cb*(512+16)+256*16 <= limit {
				return w1{rpw: rpw, ks: ks, cb: cb}, true
			}
		}
	}
	return w1{}, false
}

// dispatchW1 encodes the pending matvecs as one q1_w1 dispatch.
func (b *Backend) dispatchW1(key opKey, cfg w1, ps []pendingMatMul, bits, scales span, src, resid *tensor, fused []binding, defs map[string]shaders.Const) {
	w0 := ps[0].w
	key.v |= keyW1
	total := 0
	for _, p := range ps {
		total += p.w.m
	}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		m0, m1 := defs["Q1M0"], defs["Q1M1"]
		for k, v := range map[string]shaders.Const{
			"K": shaders.U32(w0.k), "NB": shaders.U32(w0.k / 128), "RPW": shaders.U32(cfg.rpw), "KS": shaders.U32(cfg.ks),
			"CB": shaders.U32(cfg.cb), "XS": shaders.U32(cfg.cb * 32), "XSUM": shaders.U32(cfg.cb * 4), "WG": shaders.U32(256),
			"RED": shaders.U32(256), "M0": m0, "M1": m1, "W1": shaders.Flag(true),
			"OUT2": shaders.Flag(len(ps) > 1), "OUT3": shaders.Flag(len(ps) > 2), "ADD": shaders.Flag(resid != nil)} {
			defs[k] = v
		}
		k, err := b.d.kernel("q1_w1", defs)
		return k, matVecBindings(bits, scales, src, ps, resid, fused), err
	})
	b.dispatch(o, total/cfg.rpw, 1, 1)
}

// matVecBindings are the bindings of the decode matvecs that take x as it
// is (q1_w1, q1_matvec, q1_popc, q1_lut): the weights' words and scales,
// x, each matrix's output, the residual it adds into, then those of the
// fused input.
func matVecBindings(bits, scales span, src *tensor, ps []pendingMatMul, resid *tensor, fused []binding) []binding {
	bufs := []binding{bits.binding(), scales.binding(), whole(src.buf)}
	for _, p := range ps {
		bufs = append(bufs, whole(p.dst.buf))
	}
	if resid != nil {
		bufs = append(bufs, whole(resid.buf))
	}
	return append(bufs, fused...)
}

// xqOptions maps a MatVec name to q1_xq's shape (xqRPW, xqSepGLU,
// xqGLUWG): xq8/xq16/xq32 (and tab8/tab16/tab32) fix the rows per workgroup, xqs computes SwiGLU
// in its own dispatch, xqe256/xqe1024 size the epilogue's workgroup (512
// otherwise).
func xqOptions(matvec string) (rpw int, sepGLU bool, gluWG int) {
	gluWG = 512
	switch matvec {
	case "xq8", "xq16", "xq32":
		rpw, _ = strconv.Atoi(matvec[2:])
	case "tab8", "tab16", "tab32":
		rpw, _ = strconv.Atoi(matvec[3:])
	case "xqs":
		sepGLU = true
	case "xqe256":
		gluWG = 256
	case "xqe1024":
		gluWG = 1024
	}
	return rpw, sepGLU, gluWG
}

// xqShape is q1_xq's workgroup for matrices of K = 128·nb ending at
// ends: rpw rows × ks slices of K in wg threads. Without glu ks is the
// most slices (≤ 32) that still give every thread a block, unless xqRPW
// fixes it, and every matrix's rows must be a multiple of rpw; with glu
// (gate, up) the workgroup is 32 rows of each.
func (b *Backend) xqShape(nb int, ends []int, glu bool) (rpw, ks, wg int, ok bool) {
	if glu {
		wg = min(b.xqGLUWG, int(b.d.Limits.MaxComputeInvocationsPerWorkgroup))
		return 64, wg / 64, wg, ends[0]%32 == 0 && wg >= 64
	}
	// Even slices: 8 rows × the smallest divisor of nb from 32 to 128, so
	// that no slice waits on another's extra block (the 27B's K of 5120 is
	// 40 blocks: 32 slices leave 8 of them two blocks, 40 one).
	if b.xqEven && b.xqRPW == 0 && rowsIn(ends, 8) {
		for even := 32; even <= min(nb, 128, int(b.d.Limits.MaxComputeInvocationsPerWorkgroup)/8); even++ {
			if nb%even == 0 {
				return 8, even, 8 * even, true
			}
		}
	}
	ks = 8
	for ks < 32 && 2*ks <= nb {
		ks *= 2
	}
	if b.xqRPW > 0 {
		ks = 256 / b.xqRPW
	}
	if b.xqBigRPW > 0 && ends[len(ends)-1] >= bigRows {
		ks = 256 / b.xqBigRPW
	}
	for ; ks <= 32; ks *= 2 {
		if rpw = 256 / ks; rowsIn(ends, rpw) {
			return rpw, ks, 256, true
		}
	}
	return 0, 0, 0, false
}

// rowsIn reports whether every matrix of a group ending at ends (running
// totals of rows) has a multiple of rpw rows.
func rowsIn(ends []int, rpw int) bool {
	for _, e := range ends {
		if e%rpw != 0 {
			return false
		}
	}
	return true
}

// xqOK reports whether decode activations are rounded to Q8_0 once by
// their producer for q1_xq: with the w1 kernels ("auto", tab*, xq* or
// "w1") and the default fusion.
func (b *Backend) xqOK() bool {
	return !b.noFuse && !b.fuseNorm && (b.tab || b.matvec == "w1" || strings.HasPrefix(b.matvec, "xq"))
}

// xqBuffers gives t the buffers of its Q8_0 rounding.
func (b *Backend) xqBuffers(t *tensor) error {
	if t.xq != nil {
		return nil
	}
	q, err := b.d.newBuffer(t.name+".xq", uint64(t.rows*t.cols*4), storageUsage)
	if err != nil {
		return err
	}
	sum, err := b.d.newBuffer(t.name+".xqsum", uint64(max(4, t.rows*t.cols/32*4)), storageUsage)
	if err != nil {
		q.Release()
		return err
	}
	t.xq, t.xqSum = q, sum
	if b.tab {
		// decode rounds one row; its table is 16 values per 4
		if t.xtab, err = b.d.newBuffer(t.name+".xtab", uint64(t.cols*16), storageUsage); err != nil {
			return err
		}
	}
	return nil
}

// tabOut is the producer's binding of t's lookup table at slot, and its
// TAB flag; none without Backend.tab.
func (b *Backend) tabOut(t *tensor, slot uint32, defs map[string]shaders.Const, bufs []binding) []binding {
	defs["TAB"] = shaders.Flag(b.tab)
	if !b.tab {
		return bufs
	}
	return append(bufs, at(slot, whole(t.xtab)))
}

// dispatchXQ encodes the pending matvecs on x's Q8_0 rounding as one
// q1_xq dispatch, with the SwiGLU epilogue for glu (gate, up); it reports
// false, encoding nothing, when q1_xq cannot take the shape.
func (b *Backend) dispatchXQ(key opKey, ps []pendingMatMul, ends []int, bits, scales span, x, resid *tensor, glu bool) bool {
	w0 := ps[0].w
	if w0.k%128 != 0 || !w0.interleaved || b.tab && x.xtab == nil {
		return false
	}
	rpw, ks, wg, ok := b.xqShape(w0.k/128, ends, glu)
	if !ok {
		return false
	}
	key.v |= keyXQ
	groups := ends[len(ends)-1] / rpw
	h := ps[0].dst
	if glu {
		key.v |= keyXQGLU
		groups = w0.m / 32
		if err := b.xqBuffers(h); err != nil {
			b.fail(err)
			return true
		}
	}
	o := b.prepared(key, func() (*kernel, []binding, error) {
		defs := q1Layout(map[string]shaders.Const{
			"K": shaders.U32(w0.k), "NB": shaders.U32(w0.k / 128), "RPW": shaders.U32(rpw), "KS": shaders.U32(ks),
			"WG": shaders.U32(wg), "M0": shaders.U32(ends[0]), "M1": shaders.U32(ends[min(1, len(ends)-1)]), "GLU": shaders.Flag(glu),
			"OUT2": shaders.Flag(len(ps) > 1), "OUT3": shaders.Flag(len(ps) > 2), "ADD": shaders.Flag(resid != nil), "TAB": shaders.Flag(b.tab)}, true, ends...)
		k, err := b.d.kernel("q1_xq", defs)
		bufs := []binding{bits.binding(), scales.binding(), whole(x.xq), whole(x.xqSum)}
		if b.tab {
			bufs = []binding{bits.binding(), scales.binding(), whole(x.xtab)}
		}
		for i, p := range ps {
			bufs = append(bufs, at(uint32(4+i), whole(p.dst.buf)))
		}
		if resid != nil {
			bufs = append(bufs, at(7, whole(resid.buf)))
		}
		if glu {
			bufs = append(bufs, at(8, whole(h.xq)), at(9, whole(h.xqSum)))
			if b.tab {
				bufs = append(bufs, at(10, whole(h.xtab)))
			}
		}
		return k, bufs, err
	})
	b.dispatch(o, groups, 1, 1)
	return true
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// roundActivations rounds x to w's vec-dot type into x's scratch buffer
// (F32 weights use x as is).
func (b *Backend) roundActivations(x *tensor, w *weight, rows, n int) *wgpu.Buffer {
	mode, block := activationMode(w.typ)
	if mode == "" {
		return x.buf
	}
	if w.k%block != 0 {
		b.shapeErr("MatMul: %s rows of %d are not a multiple of the %d-value activation block", w.name, w.k, block)
		return nil
	}
	if buf, current := b.roundingBuffer(x, mode); buf == nil || current {
		return buf
	}
	o := b.prepared(opKey{kind: "quant", a: x, i: block, b: mode}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("quantize", map[string]shaders.Const{
			"K": shaders.U32(x.cols), "BLOCK": shaders.U32(block), "XROWS": shaders.U32(rows), mode: shaders.Flag(true)})
		return k, []binding{whole(b.batchBuf), whole(x.buf), whole(x.scratch)}, err
	})
	b.dispatch(o, ceilDiv(x.cols/block, 64), n, 1)
	b.rounded.x, b.rounded.mode, b.rounded.at = x, mode, b.dispatches
	return x.scratch
}

// roundingBuffer is x's rounding buffer (allocated on first use: x's
// size in f32), and whether it already holds x rounded in mode with only
// that rounding's readers dispatched since; nil after a failure.
func (b *Backend) roundingBuffer(x *tensor, mode string) (buf *wgpu.Buffer, current bool) {
	if b.rounded.x == x && b.rounded.mode == mode && b.rounded.at == b.dispatches {
		return x.scratch, true
	}
	if x.scratch == nil {
		buf, err := b.d.newBuffer(x.name+".q", uint64(x.rows*x.cols*4), storageUsage)
		if err != nil {
			b.fail(err)
			return nil, false
		}
		x.scratch = buf
	}
	return x.scratch, false
}

// readRounded records that the dispatches since x was rounded only read
// its rounding (matmuls of x into other tensors).
func (b *Backend) readRounded(x *tensor) {
	if b.rounded.x == x {
		b.rounded.at = b.dispatches
	}
}

// activationMode maps a weight type to how llama.cpp quantizes the
// activations it meets (quant.VecDotType; Q8_0 for a type the CPU codecs
// do not know).
func activationMode(t gguf.Type) (mode string, block int) {
	if quant.Supported(t) {
		t = quant.VecDotType(t)
	}
	switch t {
	case gguf.F32:
		return "", 1
	case gguf.F16:
		return "F16", 1
	case gguf.BF16:
		return "BF16", 1
	case gguf.Q8_K, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		return "Q8_K", 256
	}
	return "Q8_0", 32
}

func (b *Backend) RMSNorm(dstT, xT infer.Tensor, wI infer.Weight, eps float32) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, x, w := b.asTensor("RMSNorm dst", dstT), b.asTensor("RMSNorm x", xT), b.weightArg("RMSNorm", wI)
	if dst == nil || x == nil || w == nil {
		return
	}
	g := w.k * w.m
	if w.typ != gguf.F32 || g == 0 || x.cols%g != 0 || dst.cols != x.cols {
		b.shapeErr("RMSNorm: weight %s (%s, %d values) against rows of %d", w.name, w.typ, g, x.cols)
		return
	}
	// With Fuse "all", a decode token norm waits to be folded into the
	// matvecs that read its result (q/k/v, gate/up).
	if b.fuseNorm && b.n == 1 && dst != x && g == x.cols && x.cols%4 == 0 && min(x.rows, dst.rows) >= 1 && len(w.chunks) == 1 {
		b.record(node{op: opNorm, dst: dst, x: x, w: w, eps: eps, lazy: true})
		return
	}
	// A per-head norm in place waits for the Rope after it (norm_rope,
	// qk_rope_store, the fused attention).
	if dst == x && g < x.cols {
		b.record(node{op: opHeadNorm, x: x, w: w, eps: eps})
		return
	}
	// A decode token norm also writes its Q8_0 rounding for the matvecs
	// that read it.
	q8 := b.xqOK() && b.n == 1 && g == x.cols && x.cols%128 == 0 && min(x.rows, dst.rows) >= 1
	b.record(node{op: opNorm, dst: dst, x: x, w: w, eps: eps, q8: q8})
}

// actQ8Op is a decode row that act_q8.wgsl computes with its Q8_0
// rounding, one of: dst = RMSNorm(x)·norm over the row (dst ≠ x;
// rmsnorm.wgsl's 256-thread summation order); dst = silu(x)·up (dst may
// be x), with up first normed in place per head where upNorm is set (a
// vHeadNorm waiting on up, computed as that value would be); dst =
// x·sigmoid(gate) (dst may be x), unary.wgsl's gate.
type actQ8Op struct {
	dst, x *tensor
	norm   *weight
	eps    float32
	up     *tensor
	upNorm value
	gate   *tensor
}

// actQ8 encodes a as one dispatch, one thread per value.
func (b *Backend) actQ8(a actQ8Op) {
	dst, x := a.dst, a.x
	g := x.cols
	inplace := dst == x
	keyEps := a.eps // the norm's: the row's (norm) or up's heads' (upNorm), never both
	if a.upNorm.w != nil {
		keyEps = a.upNorm.eps
	}
	o := b.prepared(opKey{kind: "actq8", a: dst, b: x, c: a.norm, d: a.up, e: a.gate, f: keyEps, g: a.upNorm.w}, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{"G": shaders.U32(g), "WG": shaders.U32(256), "INPLACE": shaders.Flag(inplace),
			"HNORM": shaders.Flag(a.upNorm.w != nil)}
		var bufs []binding
		if !inplace {
			bufs = append(bufs, at(0, whole(x.buf)))
		}
		switch {
		case a.norm != nil:
			defs["NORM"], defs["EPS"] = shaders.Flag(true), shaders.F32(a.eps)
			bufs = append(bufs, at(1, whole(a.norm.chunks[0].buf)))
		case a.gate != nil:
			defs["GATE"] = shaders.Flag(true)
			bufs = append(bufs, at(1, whole(a.gate.buf)))
		default:
			defs["GLU"] = shaders.Flag(true)
			bufs = append(bufs, at(1, whole(a.up.buf)))
		}
		if hw := a.upNorm.w; hw != nil {
			defs["NG"], defs["HEPS"] = shaders.U32(hw.k*hw.m), shaders.F32(a.upNorm.eps)
			bufs = append(bufs, at(6, whole(hw.chunks[0].buf)))
		}
		bufs = b.tabOut(dst, 5, defs, append(bufs, at(2, whole(dst.buf)), at(3, whole(dst.xq)), at(4, whole(dst.xqSum))))
		k, err := b.d.kernel("act_q8", defs)
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(g, 256), 1, 1)
}

// normThreads is the workgroup size of rmsnorm.wgsl over groups of g
// values; the matvecs that fuse a norm reproduce its summation order.
func normThreads(g int) int {
	wg := 32
	for wg*2 <= g && wg < 256 {
		wg *= 2
	}
	return wg
}

// rmsNorm encodes RMSNorm (operands checked), with q8 also dst's Q8_0
// rounding into dst.xq.
func (b *Backend) rmsNorm(dst, x *tensor, w *weight, eps float32, q8 bool) {
	g := w.k * w.m
	rows := min(x.rows, dst.rows)
	n := min(rows, b.n)
	wg := normThreads(g)
	inplace := dst == x
	o := b.prepared(opKey{kind: "rmsnorm", a: dst, b: x, c: w, f: eps, i: boolInt(q8)}, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "G": shaders.U32(g), "EPS": shaders.F32(eps), "WG": shaders.U32(wg),
			"XROWS": shaders.U32(rows), "INPLACE": shaders.Flag(inplace), "Q8": shaders.Flag(q8)}
		bufs := []binding{whole(b.batchBuf), whole(w.chunks[0].buf)}
		if !inplace {
			bufs = append(bufs, whole(x.buf))
		}
		bufs = append(bufs, whole(dst.buf))
		if q8 {
			bufs = b.tabOut(dst, 6, defs, append(bufs, at(4, whole(dst.xq)), at(5, whole(dst.xqSum))))
		}
		k, err := b.d.kernel("rmsnorm", defs)
		return k, bufs, err
	})
	b.dispatch(o, x.cols/g, n, 1)
}

// Rope is recorded: fuse makes it one norm+RoPE with a per-head norm
// waiting on x, which may wait for the StoreKV after it (normRope).
func (b *Backend) Rope(xT infer.Tensor, r infer.Rope) {
	if b.err != nil || b.enc == nil {
		return
	}
	x := b.asTensor("Rope", xT)
	if x == nil {
		return
	}
	if r.HeadDim <= 0 || r.Dims <= 0 || r.Dims > r.HeadDim || r.Dims%2 != 0 || x.cols%r.HeadDim != 0 {
		b.shapeErr("Rope: head %d, dims %d over rows of %d", r.HeadDim, r.Dims, x.cols)
		return
	}
	if b.kv == nil {
		b.fail(errors.New("gpu: Rope before NewKVCache (the angle table spans the cache's context)"))
		return
	}
	table, ok := b.ropes[r]
	if !ok {
		ctx := b.kv.spec.Context
		half := r.Dims / 2
		vals := make([]float32, 2*half*ctx)
		cos, sin := make([]float32, half), make([]float32, half)
		for p := 0; p < ctx; p++ {
			r.Angles(p, cos, sin)
			for j := 0; j < half; j++ {
				vals[2*(p*half+j)] = cos[j]
				vals[2*(p*half+j)+1] = sin[j]
			}
		}
		buf, err := b.d.upload("rope", floatsToBytes(vals))
		if err != nil {
			b.fail(err)
			return
		}
		b.ropes[r] = buf
		table = buf
	}
	// q's and k's norm+RoPE wait for the StoreKV after them
	b.record(node{op: opRope, x: x, rope: r, table: table, lazy: !b.noFuse && r.HeadDim <= 1024})
}

// rope encodes a Rope of its own, in place.
func (b *Backend) rope(x *tensor, r infer.Rope, table *wgpu.Buffer) {
	ctx := b.kv.spec.Context
	o := b.prepared(opKey{kind: "rope", a: x, b: r}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("rope", map[string]shaders.Const{
			"COLS": shaders.U32(x.cols), "HEAD_DIM": shaders.U32(r.HeadDim), "DIMS": shaders.U32(r.Dims),
			"XROWS": shaders.U32(x.rows), "CTX": shaders.U32(ctx)})
		return k, []binding{whole(b.batchBuf), whole(table), whole(x.buf)}, err
	})
	b.dispatch(o, ceilDiv(x.cols/r.HeadDim*r.Dims/2, 64), b.active(x), 1)
}

// StoreKV is recorded: fuse makes it one qk_rope_store with q's and k's
// waiting norm+RoPEs, which in decode may wait for the Attention after it
// (qkRopeStore).
func (b *Backend) StoreKV(layer int, kT, vT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	k, v := b.asTensor("StoreKV k", kT), b.asTensor("StoreKV v", vT)
	if k == nil || v == nil {
		return
	}
	n := node{op: opStoreKV, x: k, y: v, layer: layer}
	if b.kv != nil {
		s := b.kv.spec
		kvd := s.KVHeads * s.HeadDim
		if k.cols == kvd && v.cols == kvd && layer >= 0 && layer < s.Layers {
			n.headDim = s.HeadDim
		}
		// In decode over several splits, or where attn_head or attn_lat
		// may take it, the Attention after it takes it into attn_qk,
		// attn_head or attn_lat.
		n.lazy = b.n == 1 && (b.splits > 1 || b.batch.Pos < max(b.headMax, b.latMax)) && !b.noFuse
	}
	b.record(n)
}

// storeKV encodes a StoreKV of its own.
func (b *Backend) storeKV(layer int, k, v *tensor) {
	if b.kv == nil {
		b.fail(errors.New("gpu: StoreKV before NewKVCache"))
		return
	}
	s := b.kv.spec
	kvd := s.KVHeads * s.HeadDim
	if layer < 0 || layer >= s.Layers || k.cols != kvd || v.cols != kvd {
		b.shapeErr("StoreKV: layer %d of %d, k/v of %d/%d columns, cache rows of %d", layer, s.Layers, k.cols, v.cols, kvd)
		return
	}
	rows := min(k.rows, v.rows)
	n := min(rows, b.n)
	kc, vc, off := b.kvBind(layer)
	o := b.prepared(opKey{kind: "storekv", a: k, b: v, i: layer}, func() (*kernel, []binding, error) {
		kern, err := b.d.kernel("store_kv", map[string]shaders.Const{
			"KVD": shaders.U32(kvd), "XROWS": shaders.U32(rows), "CTX": shaders.U32(s.Context),
			"LAYER_OFF": shaders.U32(off)})
		return kern, []binding{whole(b.batchBuf), whole(k.buf), whole(v.buf), kc, vc}, err
	})
	b.dispatch(o, ceilDiv(kvd/2, 64), n, 1)
}

// Attention is recorded: fuse gives it the KV store waiting for it, with
// q's and k's norm+RoPE, where the fused kernel n.fused can take them
// (attnPrologue); otherwise it is encoded as it is after the store.
func (b *Backend) Attention(dstT, qT infer.Tensor, layer int, a infer.Attn) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, q := b.asTensor("Attention dst", dstT), b.asTensor("Attention q", qT)
	if dst == nil || q == nil {
		return
	}
	n := node{op: opAttn, dst: dst, x: q, layer: layer, attn: a}
	n.fused, n.fusedQ8 = b.attnFused(dst, q, layer, a)
	// the split passes' last (attn_sum) rounds dst for the output
	// projection
	n.q8 = !(b.n == 1 && b.splits == 1 && !b.noFuse) && b.attnSumQ8(a)
	b.record(n)
}

// attnFused is the fused attention that would take a waiting KV store
// for an attention of q into dst at layer, and whether it writes dst's
// rounding: the first of attn_lat, attn_head and (over several splits)
// attn_qk that the device, the pass and the shapes allow (0: none).
func (b *Backend) attnFused(dst, q *tensor, layer int, a infer.Attn) (attnKind, bool) {
	if b.kv == nil || b.n != 1 || b.noFuse {
		return 0, false
	}
	s := b.kv.spec
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.KVHeads != s.KVHeads || a.HeadDim != s.HeadDim ||
		q.cols != a.Heads*a.HeadDim || dst.cols != q.cols || dst == q || layer < 0 || layer >= s.Layers {
		return 0, false
	}
	maxInv := int(b.d.Limits.MaxComputeInvocationsPerWorkgroup)
	// attn_lat and attn_head: q8 is the kernel's own condition for its
	// Q8_0 epilogue, which also needs xq on and room for its two buffers
	// (11 storage bindings in all)
	q8Room := b.xqOK() && b.d.Limits.MaxStorageBuffersPerShaderStage >= uint32(11+boolInt(b.tab))
	_, _, off := b.kvBind(layer)
	seq := b.batch.Pos + 1
	if b.latMax != 0 && seq <= b.latMax && (a.HeadDim == 64 || a.HeadDim == 128) && maxInv >= latWG && off%4 == 0 {
		return attnLat, q8Room
	}
	_, tile, ok := b.attnParams(a)
	if ok && seq <= b.attnHeadMax(tile, a.HeadDim) && a.HeadDim%8 == 0 && off%4 == 0 && attnHeadWG(a.HeadDim) <= maxInv {
		return attnHead, q8Room && a.HeadDim%32 == 0
	}
	if ok && b.splits > 1 {
		return attnQK, b.attnSumQ8(a)
	}
	return 0, false
}

// encodeAttention encodes attention n: with the waiting store s, fused as
// n.fused; otherwise over the cache as the store left it.
func (b *Backend) encodeAttention(at *node, store value) {
	if b.err != nil {
		return
	}
	if store.kind == vQKStore {
		switch at.fused {
		case attnLat:
			b.attnLat(at, store)
		case attnHead:
			b.attnHead(at, store)
		case attnQK:
			b.attnQK(at, store)
		}
		return
	}
	dst, q, layer, a := at.dst, at.x, at.layer, at.attn
	if b.kv == nil {
		b.fail(errors.New("gpu: Attention before NewKVCache"))
		return
	}
	s := b.kv.spec
	if a.Heads <= 0 || a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 || a.KVHeads != s.KVHeads || a.HeadDim != s.HeadDim ||
		q.cols != a.Heads*a.HeadDim || dst.cols != q.cols || layer < 0 || layer >= s.Layers || dst == q {
		b.shapeErr("Attention: %+v on q %d cols, cache %+v, layer %d", a, q.cols, s, layer)
		return
	}
	qpg := a.Heads / a.KVHeads
	wg, tile, ok := b.attnParams(a)
	if !ok {
		b.fail(fmt.Errorf("gpu: attention with head_dim %d and %d query heads per kv head: %w", a.HeadDim, qpg, ErrUnsupported))
		return
	}
	rows := min(q.rows, dst.rows)
	n := min(rows, b.n)
	if !b.attnBuffers(q, a, rows, false) {
		return
	}
	kvd := s.KVHeads * s.HeadDim
	kc, vc, off := b.kvBind(layer)
	defs := func() map[string]shaders.Const {
		return map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "KVHEADS": shaders.U32(a.KVHeads), "QPG": shaders.U32(qpg), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(kvd), "QROWS": shaders.U32(rows), "LAYER_OFF": shaders.U32(off),
			"SCALE": shaders.F32(a.Scale), "TILE": shaders.U32(tile), "WG": shaders.U32(wg)}
	}
	// With one split (decode over ≤ 32 positions) attn_one does exactly
	// the work of attn_stats and attn_pv on the same workgroups, without
	// the two launches between them and attn_sum. It is not used for
	// longer sequences: at 200 positions one workgroup per kv head took
	// 42 µs on the H200 against 26 µs for the split passes at 600.
	if b.n == 1 && b.splits == 1 && !b.noFuse {
		one := b.prepared(opKey{kind: "attnone", a: q, b: a, c: dst, i: layer}, func() (*kernel, []binding, error) {
			k, err := b.d.kernel("attn_one", defs())
			return k, []binding{whole(b.batchBuf), whole(q.buf), kc, vc, whole(dst.buf)}, err
		})
		b.dispatch(one, a.KVHeads, n, 1)
		return
	}
	st := b.prepared(opKey{kind: "attnstats", a: q, b: a, i: layer}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("attn_stats", defs())
		return k, []binding{whole(b.batchBuf), whole(q.buf), kc, whole(q.stats)}, err
	})
	b.dispatch(st, a.KVHeads, n, b.splits)
	pv := b.prepared(opKey{kind: "attnpv", a: q, b: a, i: layer}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("attn_pv", defs())
		return k, []binding{whole(b.batchBuf), whole(q.buf), kc, vc, whole(q.stats), whole(q.part)}, err
	})
	b.dispatch(pv, a.KVHeads, n, b.splits)
	b.attnSum(dst, q, a, rows)
}

// kvBind binds layer's rows of the K and V cache: at a binding offset
// where the layer's bytes allow one, so that every layer shares one
// pipeline per kernel (a constant offset compiled each attention kernel
// once per layer, all of them on the first decode past one split), else
// the whole buffers with the layer's first u32 word as the constant
// LAYER_OFF (returned).
func (b *Backend) kvBind(layer int) (k, v binding, off int) {
	s := b.kv.spec
	kvd := s.KVHeads * s.HeadDim
	bytes := uint64(s.Context * kvd * 2)
	if align := uint64(max(256, b.d.Limits.MinStorageBufferOffsetAlignment)); bytes%align == 0 {
		o := uint64(layer) * bytes
		return binding{buf: b.kv.k, offset: o, size: bytes}, binding{buf: b.kv.v, offset: o, size: bytes}, 0
	}
	return whole(b.kv.k), whole(b.kv.v), layer * s.Context * kvd / 2
}

// attnParams is attention's workgroup size and score tile for a
// (attn_tile.wgsli), or ok false where the kernels cannot take it. Each
// query head of the group scores TILE positions at a time with a tree
// reduction over its TILE threads, so TILE is a power of two; when the
// group size (3 in bonsai-tiny) does not divide WG, the spare threads idle
// through the scoring.
func (b *Backend) attnParams(a infer.Attn) (wg, tile int, ok bool) {
	qpg := a.Heads / a.KVHeads
	wg = 128
	for wg < qpg*a.HeadDim/4 {
		wg *= 2
	}
	if a.HeadDim%4 != 0 || wg > int(b.d.Limits.MaxComputeInvocationsPerWorkgroup) || qpg > wg {
		return 0, 0, false
	}
	tile = 1
	for 2*tile*qpg <= wg {
		tile *= 2
	}
	return wg, tile, true
}

// attnBuffers gives q the split partials (and with scores, its scaled
// scores over the cache's context) that attention writes.
func (b *Backend) attnBuffers(q *tensor, a infer.Attn, rows int, scores bool) bool {
	slots := max(rows, maxSplits)
	if q.part == nil {
		part, err := b.d.newBuffer(q.name+".part", uint64(slots*a.Heads*a.HeadDim*4), storageUsage)
		if err != nil {
			b.fail(err)
			return false
		}
		stats, err := b.d.newBuffer(q.name+".stats", uint64(slots*a.Heads*8), storageUsage)
		if err != nil {
			part.Release()
			b.fail(err)
			return false
		}
		q.part, q.stats = part, stats
	}
	if need := uint64(a.Heads * b.kv.spec.Context * 4); scores && (q.scores == nil || q.scores.GetSize() < need) {
		if q.scores != nil {
			b.dropOps(q.scores)
			q.scores.Release()
			q.scores = nil
		}
		buf, err := b.d.newBuffer(q.name+".scores", need, storageUsage)
		if err != nil {
			b.fail(err)
			return false
		}
		q.scores = buf
	}
	return true
}

// attnQK encodes a decode layer's waiting q/k norm+Rope and KV store p
// with its attention n (fuse checked the shapes): attn_qk (prologue and
// pass 1, keeping the scores), attn_pv on those scores, attn_sum. q and k
// are left un-rotated (fuse leaves their norm+Rope waiting).
func (b *Backend) attnQK(n *node, p value) {
	s := b.kv.spec
	dst, a := n.dst, n.attn
	q, k, v := p.dst, p.src, p.up
	wg, tile, _ := b.attnParams(a)
	rows := min(q.rows, dst.rows)
	if !b.attnBuffers(q, a, rows, true) {
		return
	}
	qpg := a.Heads / a.KVHeads
	kvd := s.KVHeads * s.HeadDim
	r := p.rope
	nrwg := normRopeThreads(a.HeadDim)
	kc, vc, off := b.kvBind(p.layer)
	defs := func() map[string]shaders.Const {
		return map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "KVHEADS": shaders.U32(a.KVHeads), "QPG": shaders.U32(qpg), "D": shaders.U32(a.HeadDim),
			"KVD": shaders.U32(kvd), "QROWS": shaders.U32(1), "LAYER_OFF": shaders.U32(off),
			"SCALE": shaders.F32(a.Scale), "TILE": shaders.U32(tile), "WG": shaders.U32(wg), "SCTX": shaders.U32(s.Context)}
	}
	k1 := b.prepared(opKey{kind: "attnqk", a: q, b: k, c: v, d: p.w, e: p.kw, g: a, i: p.layer, f: p.eps}, func() (*kernel, []binding, error) {
		d := defs()
		d["DIMS"], d["QEPS"], d["KEPS"], d["NRWG"] = shaders.U32(r.Dims), shaders.F32(p.eps), shaders.F32(p.keps), shaders.U32(nrwg)
		d["VH"], d["CTX"], d["SCORES"] = shaders.U32((qpg+1)*nrwg), shaders.U32(s.Context), shaders.Flag(true)
		kern, err := b.d.kernel("attn_qk", d)
		return kern, []binding{whole(b.batchBuf), whole(p.w.chunks[0].buf), whole(p.kw.chunks[0].buf), whole(p.table),
			whole(q.buf), whole(k.buf), whole(v.buf), kc, vc, whole(q.stats), whole(q.scores)}, err
	})
	b.dispatch(k1, a.KVHeads, b.splits, 1)
	pv := b.prepared(opKey{kind: "attnpv+scored", a: q, b: a, i: p.layer}, func() (*kernel, []binding, error) {
		d := defs()
		d["SCORED"] = shaders.Flag(true)
		kern, err := b.d.kernel("attn_pv", d)
		return kern, []binding{whole(b.batchBuf), at(3, vc), at(4, whole(q.stats)), at(5, whole(q.part)), at(6, whole(q.scores))}, err
	})
	b.dispatch(pv, a.KVHeads, 1, b.splits)
	b.attnSum(dst, q, a, rows)
}

// attnHeadWG is attn_head's workgroup size: a multiple of 32 (Q8_0
// blocks) and of D/4, at least D.
func attnHeadWG(headDim int) int {
	wg := 256
	for wg < headDim {
		wg *= 2
	}
	return wg
}

// attnHeadSlots is attn_head's score slots for sequences of up to maxPos
// positions split as Begin splits them (chunks of max(32, ⌈seq/maxSplits⌉),
// each rounded up to whole tiles), and the workgroup bytes the kernel then
// needs.
func attnHeadSlots(maxPos, tile, headDim, wg int) (slots, bytes int) {
	chunk := max(32, ceilDiv(maxPos, maxSplits))
	slots = ceilDiv(maxPos, chunk) * ceilDiv(chunk, tile) * tile
	// scores and exps, tile maxes, split stats, M and 1/L, the splits'
	// partial sums, q, k and the output, the norm's tree, q8_group's
	bytes = 4 * (2*slots + slots/tile + 2*maxSplits + 2 + 8*wg + 3*headDim + 2*normRopeThreads(headDim) + wg)
	return slots, bytes
}

// attnHeadMax is the longest sequence attn_head can take for a: the
// largest power of two of at most b.headMax positions whose scores fit the
// device's workgroup memory, or 0.
func (b *Backend) attnHeadMax(tile, headDim int) int {
	limit := int(b.d.Limits.MaxComputeWorkgroupStorageSize)
	for p := 1 << 16; p >= 1; p /= 2 {
		if _, bytes := attnHeadSlots(p, tile, headDim, attnHeadWG(headDim)); p <= b.headMax && bytes <= limit {
			return p
		}
	}
	return 0
}

// attnHead encodes a decode layer's waiting q/k norm+Rope and KV store p
// with its whole attention n as one attn_head dispatch, one workgroup per
// query head (attnFused checked that the sequence fits), leaving q and k
// as attnQK leaves them.
func (b *Backend) attnHead(n *node, p value) {
	a := n.attn
	_, tile, _ := b.attnParams(a)
	wg := attnHeadWG(a.HeadDim)
	maxPos := b.attnHeadMax(tile, a.HeadDim)
	pr, ok := b.beginPrologue(n, p)
	if !ok {
		return
	}
	slots, _ := attnHeadSlots(maxPos, tile, a.HeadDim, wg)
	b.dispatchPrologue(pr, "attn_head", "attnhead", p.layer<<1|boolInt(pr.q8), func() map[string]shaders.Const {
		return map[string]shaders.Const{"TILE": shaders.U32(tile), "WG": shaders.U32(wg), "SLOTS": shaders.U32(slots),
			"TSLOTS": shaders.U32(slots / tile), "MAXSPLITS": shaders.U32(maxSplits)}
	})
}

// attnSum encodes attention's pass 3 (the splits' sum) into dst; in
// decode with q1_xq also dst's Q8_0 rounding for the output projection.
func (b *Backend) attnSum(dst, q *tensor, a infer.Attn, rows int) {
	q8 := b.attnSumQ8(a)
	if q8 {
		if err := b.xqBuffers(dst); err != nil {
			b.fail(err)
			return
		}
	}
	sum := b.prepared(opKey{kind: "attnsum", a: q, b: dst, c: a, i: boolInt(q8)}, func() (*kernel, []binding, error) {
		defs := map[string]shaders.Const{
			"HEADS": shaders.U32(a.Heads), "D": shaders.U32(a.HeadDim), "QROWS": shaders.U32(rows), "WG": shaders.U32(64), "Q8": shaders.Flag(q8)}
		bufs := []binding{whole(b.batchBuf), whole(q.part), whole(dst.buf)}
		if q8 {
			bufs = b.tabOut(dst, 5, defs, append(bufs, whole(dst.xq), whole(dst.xqSum)))
		}
		k, err := b.d.kernel("attn_sum", defs)
		return k, bufs, err
	})
	b.dispatch(sum, ceilDiv(a.Heads*a.HeadDim, 64), min(rows, b.n), 1)
}

// attnSumQ8 reports whether attn_sum also writes dst's Q8_0 rounding
// (fuse then records the rounded value: Attention's q8, attnFused).
func (b *Backend) attnSumQ8(a infer.Attn) bool {
	return b.xqOK() && b.n == 1 && a.Heads*a.HeadDim%64 == 0
}

// elementwise encodes dst = f(a, b) with the aliasing variant the operands
// need.
func (b *Backend) elementwise(kind string, dst, x, y *tensor) {
	if x.cols != y.cols || dst.cols != x.cols {
		b.shapeErr("%s: %d, %d and %d columns", kind, dst.cols, x.cols, y.cols)
		return
	}
	rows := min(dst.rows, x.rows, y.rows)
	n := min(rows, b.n)
	variant := "NOALIAS"
	bufs := []binding{whole(b.batchBuf)}
	switch {
	case dst == x:
		variant = "ALIAS_A"
		bufs = append(bufs, whole(y.buf), whole(dst.buf))
	case dst == y:
		variant = "ALIAS_B"
		bufs = append(bufs, whole(x.buf), whole(dst.buf))
	default:
		bufs = append(bufs, whole(x.buf), whole(y.buf), whole(dst.buf))
	}
	o := b.prepared(opKey{kind: kind, a: dst, b: x, c: y}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("elementwise", map[string]shaders.Const{
			"COLS": shaders.U32(dst.cols), "XROWS": shaders.U32(rows), variant: shaders.Flag(true), kind: shaders.Flag(true)})
		return k, bufs, err
	})
	b.dispatch(o, ceilDiv(dst.cols, 256), n, 1)
}

// SwiGLU is recorded: fuse makes it gate/up's q1_xq epilogue where it
// can, else computes it in the down matvec's x load (gate and up fresh
// from one pair of matvecs); otherwise (qwen35's DeltaNet output gate: its
// operands come from different ops) a dispatch of its own that also
// rounds for the next q1_xq is cheaper (q8).
func (b *Backend) SwiGLU(dstT, gateT, upT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, g, u := b.asTensor("SwiGLU dst", dstT), b.asTensor("SwiGLU gate", gateT), b.asTensor("SwiGLU up", upT)
	if dst == nil || g == nil || u == nil {
		return
	}
	if g == u {
		b.shapeErr("SwiGLU: gate and up are the same tensor")
		return
	}
	shaped := b.n == 1 && dst != u && g.cols == u.cols && dst.cols == g.cols
	b.record(node{op: opSwiGLU, dst: dst, x: g, y: u,
		q8:   b.xqOK() && shaped && g.cols%32 == 0 && dst.rows >= 1,
		lazy: !b.noFuse && shaped && g.cols%4 == 0})
}

// Add is recorded: fuse folds x += W·v right after that matvec into its
// dispatch (it still writes its own output, so nothing changes for
// readers).
func (b *Backend) Add(dstT, aT, bT infer.Tensor) {
	if b.err != nil || b.enc == nil {
		return
	}
	dst, x, y := b.asTensor("Add dst", dstT), b.asTensor("Add a", aT), b.asTensor("Add b", bT)
	if dst == nil || x == nil || y == nil {
		return
	}
	if dst == x && dst == y {
		b.shapeErr("Add: dst, a and b are the same tensor")
		return
	}
	b.record(node{op: opAdd, dst: dst, x: x, y: y})
}

func (b *Backend) LastRow(dstT, srcT infer.Tensor) {
	if !b.ready() {
		return
	}
	dst, src := b.tensorArg("LastRow dst", dstT), b.tensorArg("LastRow src", srcT)
	if dst == nil || src == nil {
		return
	}
	if dst.cols != src.cols || dst == src {
		b.shapeErr("LastRow: %d vs %d columns", dst.cols, src.cols)
		return
	}
	o := b.prepared(opKey{kind: "lastrow", a: dst, b: src}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("lastrow", map[string]shaders.Const{"COLS": shaders.U32(src.cols), "SROWS": shaders.U32(src.rows)})
		return k, []binding{whole(b.batchBuf), whole(src.buf), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(src.cols, 256), 1, 1)
}

// copyOut ends the pass, copies size bytes of src into staging and resumes.
func (b *Backend) copyOut(src, staging *wgpu.Buffer, size int) {
	b.endPass()
	if err := b.enc.CopyBufferToBuffer(src, 0, staging, 0, uint64((size+3)&^3)); err != nil {
		b.fail(fmt.Errorf("gpu: copying results: %w", err))
	}
	b.beginPass()
}

func (b *Backend) Read(tT infer.Tensor, dst []float32) {
	if !b.ready() {
		return
	}
	t := b.tensorArg("Read", tT)
	if t == nil {
		return
	}
	n := b.active(t)
	if len(dst) < n*t.cols {
		b.shapeErr("Read: %d floats for %d×%d", len(dst), n, t.cols)
		return
	}
	if t.passReads == 0 {
		b.touched = append(b.touched, t)
	}
	if t.passReads == len(t.stagings) {
		buf, err := b.d.newBuffer(t.name+".read", t.buf.GetSize(), readUsage)
		if err != nil {
			b.fail(err)
			return
		}
		t.stagings = append(t.stagings, buf)
	}
	staging := t.stagings[t.passReads]
	t.passReads++
	b.copyOut(t.buf, staging, n*t.cols*4)
	b.reads = append(b.reads, pendingRead{staging: staging, bytes: n * t.cols * 4, floats: dst[:n*t.cols]})
}

func (b *Backend) Argmax(tT infer.Tensor, dst []int32) {
	if !b.ready() {
		return
	}
	t := b.tensorArg("Argmax", tT)
	if t == nil {
		return
	}
	n := b.active(t)
	if len(dst) < n {
		b.shapeErr("Argmax: %d slots for %d rows", len(dst), n)
		return
	}
	if t.argmax == nil {
		a, err := b.d.newBuffer(t.name+".argmax", uint64(4*t.rows), storageUsage)
		if err != nil {
			b.fail(err)
			return
		}
		s, err := b.d.newBuffer(t.name+".argmax.read", uint64(4*t.rows), readUsage)
		if err != nil {
			a.Release()
			b.fail(err)
			return
		}
		t.argmax, t.argStaging = a, s
	}
	o := b.prepared(opKey{kind: "argmax", a: t}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("argmax", map[string]shaders.Const{"COLS": shaders.U32(t.cols), "XROWS": shaders.U32(t.rows)})
		return k, []binding{whole(b.batchBuf), whole(t.buf), whole(t.argmax)}, err
	})
	b.dispatch(o, n, 1, 1)
	if b.chainArgmax(t, dst) {
		return
	}
	b.copyOut(t.argmax, t.argStaging, 4*n)
	b.reads = append(b.reads, pendingRead{staging: t.argStaging, bytes: 4 * n, ints: dst[:n]})
}

func (b *Backend) Memory() infer.BackendMemory {
	var m infer.BackendMemory
	for _, w := range b.weights {
		m.Weights += w.bytes
	}
	for _, t := range b.tensors {
		m.Activations += int64(t.rows * t.cols * 4)
	}
	if b.kv != nil {
		m.KV = b.kv.spec.Bytes()
	}
	return m
}

func (b *Backend) Close() error {
	if b.d == nil {
		return nil
	}
	// Releasing the device waits for it at most 5 s and then frees what a
	// late pass may still use; every Commit waits for its pass, so this
	// only matters after a failed one.
	if err := waitIdle(b.d.dev); err != nil {
		return err
	}
	for _, o := range b.ops {
		o.bg.Release()
	}
	for _, w := range b.weights {
		w.release()
	}
	for _, a := range b.arenas {
		a.Release()
	}
	for _, s := range b.chain.stage {
		if s != nil {
			s.Release()
		}
	}
	b.releaseTopKs()
	for _, t := range b.tensors {
		for _, buf := range append([]*wgpu.Buffer{t.buf, t.scratch, t.part, t.stats, t.argmax, t.argStaging, t.embedRows, t.tmp, t.prep, t.xq, t.xqSum, t.xtab, t.scores}, t.stagings...) {
			if buf != nil {
				buf.Release()
			}
		}
	}
	for _, r := range b.ropes {
		r.Release()
	}
	if b.kv != nil {
		b.kv.k.Release()
		b.kv.v.Release()
	}
	if b.rec != nil {
		b.rec.release()
	}
	b.prof.release()
	b.batchBuf.Release()
	b.tokensBuf.Release()
	b.d.Close()
	b.d = nil
	return nil
}
