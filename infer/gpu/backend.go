package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/cogentcore/webgpu/wgpu"
)

// maxBatchTokens bounds one pass's batch (the token buffer is fixed so
// bind groups never change).
const maxBatchTokens = 8192

// maxSplits bounds the split-KV attention partials per (row, head).
const maxSplits = 128

// splitGroups is the number of workgroups (kv heads × splits) decode
// attention aims for: on the H100 (132 SMs) 512 workgroups of 128 threads
// are resident at once, each split then short enough that its loads are
// all in flight together.
const splitGroups = 512

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
	// dispatches), lastCensus the last committed pass's counts
	census     []*kernel
	lastCensus []kernelCount
	// dispatches encoded since the last piece of the pass was submitted
	unsubmitted int
	// submits is the number of command buffers the pass has submitted
	submits int
	// noFuse encodes every op as its own dispatch, noRounded keeps
	// producers from rounding their rows for q1_xq, and latMax is the
	// longest decode sequence attn_lat takes (0: never); New sets none
	// but latMax = latLongMaxPos: tests turn them to get the unfused, the
	// unrounded and the split-attention references they compare against
	noFuse, noRounded bool
	latMax            int
	// runByRun, set only by tests, keeps OnePass from taking rows
	runByRun bool
	// onePass, set only by tests, lets OnePass take the rows of several
	// sequences on an f16 cache or a recurrent network (see OnePass)
	onePass bool
	// forceMatVec, set only by tests, names the decode matvec kernel
	// (matvecKernels) to try first, whatever the measurements prefer
	forceMatVec string
	// deltaChunkMin is the batch from which DeltaNet runs chunked
	deltaChunkMin int
	// kvBase is the cache position the pass's sequence starts at (a pass
	// over rows: rows.go), where kvBind binds the cache; BeginRows sets
	// nextBase for the Begin it calls
	kvBase, nextBase int
	// nextSeq is the recurrent state slot BeginRows gives its Begin
	nextSeq int
	// rows: the pass is over rows of several sequences (rows.go), whose
	// positions and cache bases rowsBuf holds; nextRows is BeginRows's
	// for its Begin, nextSeqLen the longest sequence among them, and
	// rowToks and rowWords BeginRows's arrays, reused pass to pass
	rows, nextRows bool
	nextSeqLen     int
	rowsBuf        *wgpu.Buffer
	rowToks        []int32
	rowWords       []byte
	tokBytes       []byte // Begin's tokens for the device, reused pass to pass
	// seqRuns are the runs of rows of each recurrent state slot in a pass
	// over rows of several sequences, and slotBatch each slot's uniform
	// for its run (conv.wgsl's and deltanet.wgsl's RUN)
	seqRuns   []seqRun
	slotBatch []*wgpu.Buffer
	// runs: between BeginRuns and EndRuns, whose wait the passes' reads
	// (heldReads) leave for
	runs      bool
	heldReads []pendingRead
	ropes     map[infer.Rope]*wgpu.Buffer
	ops       map[opKey]*op

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

// bindsKV reports whether o's bind group holds the KV cache.
func (b *Backend) bindsKV(o *op) bool {
	return b.kv != nil && (o.binds(b.kv.k) || o.binds(b.kv.v))
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
	// base is the kvBase of an op that binds the KV cache (prepared)
	base int
}

// keyVariant tells a matvec group's variants apart in its opKey (flags,
// not strings built per dispatch, which would allocate).
type keyVariant uint8

const (
	keyGLUIn keyVariant = 1 << iota // the x load computes SwiGLU
	keyW1                           // q1_w1
	keyXQ                           // q1_xq
	keyXQGLU                        // q1_xq with the SwiGLU epilogue
	keyRows                         // a pass over rows of several sequences (ROWS)
)

// New opens a device and returns an empty backend (opts.GPU's
// AllowSoftware and Debug are dopts' business).
func New(dopts DeviceOptions, opts infer.BackendOptions) (*Backend, error) {
	d, err := OpenDevice(dopts)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		d:             d,
		opts:          opts,
		weights:       map[string]*weight{},
		ropes:         map[infer.Rope]*wgpu.Buffer{},
		ops:           map[opKey]*op{},
		latMax:        latLongMaxPos,
		deltaChunkMin: DefaultDeltaChunkMin,
	}
	if b.batchBuf, err = d.newBuffer("batch", 16, wgpu.BufferUsageUniform|wgpu.BufferUsageCopyDst); err != nil {
		d.Close()
		return nil, err
	}
	if b.tokensBuf, err = d.newBuffer("tokens", 4*maxBatchTokens, storageUsage); err != nil {
		d.Close()
		return nil, err
	}
	if b.rowsBuf, err = d.newBuffer("rows", 16*maxBatchTokens, storageUsage); err != nil {
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
			"Q1_0 native (repacked sign words); Q2_0, PQ2_0, PTQ1_0 native (2-bit codes); Q8_0, Q4_0, Q4_K, Q5_K, Q6_K native (blocks as stored); other types dequantized to f32 at load",
			weightSummary(b.weights),
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

// fail keeps the first error of the pass.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Backend) Begin(batch infer.Batch) {
	b.err = nil
	b.reads = b.reads[:0]
	if len(b.heldReads) == 0 {
		// (held reads keep their staging buffers until EndRuns)
		for _, t := range b.touched {
			t.passReads = 0
		}
		b.touched = b.touched[:0]
	}
	b.opList, b.live = b.opList[:0], b.live[:0]
	b.dispatches, b.unsubmitted, b.submits = 0, 0, 0
	b.rounded.x = nil
	for _, k := range b.census {
		k.passDispatches = 0
	}
	b.census = b.census[:0]
	b.batch = batch
	b.n = len(batch.Tokens)
	b.kvBase, b.nextBase = b.nextBase, 0
	b.rows, b.nextRows = b.nextRows, false
	seqLen := batch.Pos + len(batch.Tokens)
	if b.rows {
		seqLen = b.nextSeqLen
	}
	b.useSeq(b.nextSeq)
	b.nextSeq = 0
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
	// Decode spreads the cache over about splitGroups workgroups (at least
	// 32 positions each, at most maxSplits per kv head); prefill has
	// parallelism in its rows.
	// A pass over rows of several sequences splits the longest of them
	// as decode does, its (row, split) partials within maxSplits per head.
	seq := seqLen
	chunk := seq
	switch {
	case b.n == 1:
		splits := maxSplits
		if b.kv != nil {
			splits = min(maxSplits, max(1, splitGroups/b.kv.spec.KVHeads))
		}
		chunk = max(32, ceilDiv(seq, splits))
	case b.rows && b.n <= maxSplits:
		splits := maxSplits / b.n
		if b.kv != nil {
			splits = min(splits, max(1, splitGroups/(b.kv.spec.KVHeads*b.n)))
		}
		chunk = max(32, ceilDiv(seq, splits))
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
		b.ownState()
		return
	}
	// WriteBuffer copies the bytes before it returns: the array serves
	// every pass
	toks := b.tokBytes[:0]
	for _, t := range batch.Tokens {
		toks = binary.LittleEndian.AppendUint32(toks, uint32(t))
	}
	b.tokBytes = toks
	if err := b.d.queue.WriteBuffer(b.tokensBuf, 0, toks); err != nil {
		b.fail(fmt.Errorf("gpu: writing tokens: %w", err))
		return
	}
	b.beginEncoder()
	b.ownState()
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
	if b.runs && b.chain.pass == nil && !b.prof.active() {
		// a run of ForwardRows: its reads wait for EndRuns (rows.go)
		b.heldReads = append(b.heldReads, b.reads...)
		return nil
	}
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
	if err := b.mapReads(b.reads); err != nil {
		return err
	}
	if err := b.prof.collect(b, time.Since(start)); err != nil {
		return err
	}
	// a chained pass that had to wait anyway
	return b.chainDrain()
}

// mapReads copies the staging buffers of reads, whose passes have run,
// into their destinations.
func (b *Backend) mapReads(reads []pendingRead) error {
	var scratch []byte
	for _, r := range reads {
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
	return nil
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

// prepared returns the op for key, creating it with make on first use. An
// op that binds the KV cache binds it at the pass's kvBase, and is kept
// under that base.
func (b *Backend) prepared(key opKey, make func() (*kernel, []binding, error)) *op {
	if o, ok := b.ops[key]; ok && (b.kvBase == 0 || !b.bindsKV(o)) {
		return o
	}
	if b.kvBase != 0 {
		key.base = b.kvBase
		if o, ok := b.ops[key]; ok {
			return o
		}
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
	if !b.bindsKV(o) {
		key.base = 0
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
	}
	o.k.passDispatches++
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

// Created is what the device has made so far: after Load's warm-up a
// reply should make nothing (a pipeline took ~0.2 s on an H100).
func (b *Backend) Created() Created {
	c := b.d.created
	c.Labels = append([]string(nil), c.Labels...)
	return c
}

// kernelCount is one kernel's dispatches in a pass.
type kernelCount struct {
	name string
	n    int
}

// LastCensus is the last committed pass's dispatches per kernel name.
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

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
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
		m.KV = int64(b.kv.k.GetSize() + b.kv.v.GetSize())
	}
	if b.rec != nil {
		for _, buf := range b.rec.buffers() {
			m.Recurrent += int64(buf.GetSize())
		}
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
