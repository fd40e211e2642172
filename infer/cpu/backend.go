// Package cpu is the CPU backend: it runs each op of a forward pass as it is
// called, with the matrix products spread over a fixed pool of worker
// goroutines. Weights stay in the GGUF file's mapping; activations and the
// KV cache are allocated once, so a pass allocates nothing.
package cpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/bonsai-chat/bonsai/gguf"
	"github.com/bonsai-chat/bonsai/infer"
	"github.com/bonsai-chat/bonsai/infer/profile"
	"github.com/bonsai-chat/bonsai/infer/quant"
)

func init() {
	infer.RegisterBackend("cpu", func(o infer.BackendOptions) (infer.Backend, error) { return New(o) })
}

// Backend implements infer.Backend on the CPU.
type Backend struct {
	qpool   *quant.Pool // matrix products, attention and other row-parallel work
	weights map[string]*weight
	kv      kvCache
	rs      recurrentState
	seqs    []recurrentState // per sequence of a pass over rows, seqs[0] = rs
	runs    []seqRun         // the pass's rows by sequence state (stateRuns)
	closed  bool

	// The pass in progress.
	batch  infer.Batch
	n      int
	inPass bool
	err    error
	// A pass over rows of several sequences (BeginRows, rows.go).
	rows      []infer.Row
	rowTokens []int32
	inRows    bool

	// Phase timing.
	profiling  bool
	phase      profile.Phase
	phaseStart time.Time
	inPhase    bool
	sample     profile.Sample

	// Memory accounting.
	weightBytes, activationBytes int64
	repackedBytes, releasedBytes int64

	// Scratch reused by every pass (grown, never shrunk).
	act       quant.Activations // activations quantized for a matmul
	actOf     *tensor           // whose values act holds, until another op runs
	attn      attnJob           // the job value handed to the pool
	swiglu    swigluJob
	geglu     gegluJob
	norm      normJob
	rope      ropeJob
	store     storeJob
	add       addJob
	task      rangeTask   // the pool task handed to the products' pool
	scores    [][]float32 // per worker: attention scores over the context
	ropeCos   []float32
	ropeSin   []float32
	pending   []quant.Product            // products queued by MatMul, all reading pendingX
	pendingOf [maxPending]pendingProduct // their tensors, for errors and ordering
	pendingX  *tensor
	qf16      [][]float32    // per worker: a query head rounded to f16
	flash     []flashScratch // per worker: flash attention's query and accumulator
	dec       decodeJob      // a decode step's attention (attention_decode.go)
	decQ      []float32      // its query heads rounded to f16
	decScores []float32      // its scores, then weights, per query head
	// steps: every row of the pass is a decoding step of its own
	// (infer.Batch.Steps, or rows that all say Step).
	steps     bool
	ropeFor   infer.Rope // the parameters ropeCos/ropeSin hold angles for
	ropeValid bool       // they are this pass's

	// Recurrent layers' scratch.
	conv         convJob
	delta        deltaJob
	deltaScratch [][]float32 // per worker: a head's δ
	gateRow      []float32   // f(g) of one row for Gate
	ones         []float32   // 1s: silu(x) is SwiGLU(x, 1)

	// Hadamard's job, and the copy of its input when it regroups in place.
	hadamard    hadamardJob
	hadamardSrc []float32
}

// New starts a CPU backend with opts.Threads workers (one per core when 0).
func New(opts infer.BackendOptions) (*Backend, error) {
	threads := opts.Threads
	if threads <= 0 {
		threads = quant.PhysicalCores()
	}
	b := &Backend{
		qpool:     quant.NewPool(threads),
		weights:   map[string]*weight{},
		profiling: opts.Profile,
	}
	b.sample.Source = "cpu timers"
	b.pending = make([]quant.Product, 0, maxPending)
	b.scores = make([][]float32, threads)
	b.qf16 = make([][]float32, threads)
	b.flash = make([]flashScratch, threads)
	b.deltaScratch = make([][]float32, threads)
	return b, nil
}

func (b *Backend) Name() string { return "cpu" }

func (b *Backend) Info() infer.BackendInfo {
	return infer.BackendInfo{
		Name:    "cpu",
		Adapter: cpuModel(),
		Threads: b.qpool.Threads(),
		SIMD:    quant.SIMD(),
		Details: []string{
			fmt.Sprintf("%d worker threads", b.qpool.Threads()),
			fmt.Sprintf("weights: %d MiB in the file mapping, %d MiB repacked for the SIMD kernels (%d MiB of file pages released)",
				b.weightBytes>>20, b.repackedBytes>>20, b.releasedBytes>>20),
		},
	}
}

// weight is a bound tensor: a view of the file's mapping.
type weight struct {
	name     string
	typ      gguf.Type
	shape    []int64
	data     []byte
	cols     int // ne0: elements per row
	rows     int
	rowBytes int
	mat      *quant.Matrix // the matrix view for MatMul (nil for vectors)
}

func (w *weight) Name() string     { return w.name }
func (w *weight) Type() gguf.Type  { return w.typ }
func (w *weight) Shape() []int64   { return w.shape }
func (w *weight) row(i int) []byte { return w.data[i*w.rowBytes : (i+1)*w.rowBytes] }

func (b *Backend) LoadWeight(d infer.WeightData) (infer.Weight, error) {
	if w, ok := b.weights[d.Name]; ok {
		return w, nil
	}
	if !quant.Supported(d.Type) {
		return nil, fmt.Errorf("%w: %s is %s", infer.ErrUnsupportedType, d.Name, d.Type)
	}
	if len(d.Shape) == 0 || len(d.Shape) > gguf.MaxDims {
		return nil, fmt.Errorf("%w: %s has shape %v", infer.ErrBadShape, d.Name, d.Shape)
	}
	rows := int64(1)
	for _, n := range d.Shape[1:] {
		if n <= 0 {
			return nil, fmt.Errorf("%w: %s has shape %v", infer.ErrBadShape, d.Name, d.Shape)
		}
		rows *= n
	}
	rowBytes, err := d.Type.RowBytes(d.Shape[0])
	if err != nil || d.Shape[0] <= 0 {
		return nil, fmt.Errorf("%w: %s: %d %s elements per row: %v", infer.ErrBadShape, d.Name, d.Shape[0], d.Type, err)
	}
	if int64(len(d.Data)) != rows*rowBytes {
		return nil, fmt.Errorf("%w: %s (%v %s) needs %d bytes, has %d", infer.ErrBadShape, d.Name, d.Shape, d.Type, rows*rowBytes, len(d.Data))
	}
	w := &weight{
		name: d.Name, typ: d.Type, shape: append([]int64(nil), d.Shape...), data: d.Data,
		cols: int(d.Shape[0]), rows: int(rows), rowBytes: int(rowBytes),
	}
	if len(d.Shape) > 1 { // a matrix: MatMul goes through quant's kernels
		// A fast kernel may repack the weights into a heap copy; what the
		// heap grows by while wrapping the matrix is that copy.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := quant.NewMatrix(d.Type, w.rows, w.cols, d.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", infer.ErrUnsupportedType, d.Name, err)
		}
		runtime.ReadMemStats(&after)
		w.mat = m
		if copied := int64(after.TotalAlloc - before.TotalAlloc); copied >= int64(len(d.Data))/2 {
			b.repackedBytes += copied
			if d.Mapped {
				// The kernel reads the copy: the file's pages would only
				// double the resident weights. (Embedding lookups fault
				// back in the few rows they read.)
				b.releasedBytes += releasePages(d.Data)
			}
		}
	}
	b.weights[d.Name] = w
	b.weightBytes += int64(len(d.Data))
	return w, nil
}

// tensor is an activation buffer.
type tensor struct {
	name       string
	rows, cols int
	data       []float32
}

func (t *tensor) Name() string        { return t.name }
func (t *tensor) Rows() int           { return t.rows }
func (t *tensor) Cols() int           { return t.cols }
func (t *tensor) row(i int) []float32 { return t.data[i*t.cols : (i+1)*t.cols] }

func (b *Backend) NewTensor(name string, rows, cols int) (infer.Tensor, error) {
	if rows <= 0 || cols <= 0 || rows > 1<<20 || cols > 1<<24 {
		return nil, fmt.Errorf("%w: tensor %s of %d×%d", infer.ErrBadShape, name, rows, cols)
	}
	b.activationBytes += int64(rows) * int64(cols) * 4
	return &tensor{name: name, rows: rows, cols: cols, data: make([]float32, rows*cols)}, nil
}

// kvCache holds K and V. An f16 cache (llama.cpp's default, attention
// without flash attention) is laid out so that attention reads each head's
// keys and each of its value dimensions as one contiguous run: K by head,
// then position (Context rows of HeadDim per head); V by head, then
// dimension, then position (it is the right operand of probabilities · V,
// whose dot products run over positions, as llama.cpp's V cache without
// flash attention is stored). A decoding token at depth 4096 reads them at
// about 4× the rate of one row per position holding every head: a head's
// slice of such a row is 256 bytes every 2 KiB, and V was read down a column.
//
// A cache with a quantized K or V (spec.Quantized()) is read by flash
// attention (attention.go), one key and one value row per position: K and V
// are both by head, then position, each row the head's HeadDim values in
// its type's bytes (Q8_0 blocks, or f16 for the other side).
type kvCache struct {
	spec    infer.KVSpec
	vStride int // f16 V: elements from one dimension's positions to the next: Context and vSlack
	k, v    [][]uint16
	// Quantized: per layer, [KVHeads][Context] rows of kRow and vRow bytes.
	kq, vq     [][]byte
	kRow, vRow int
	// kRot and vRot are the Walsh–Hadamard block sizes llama.cpp rotates a
	// quantized K (with q) and V (and back the output) by; 0: none.
	kRot, vRot int
}

// vSlack pads each V dimension's run of positions: a decoding step's dot
// product runs over its positions rounded up to 64 (attention.go), up to 63
// past the end of the context.
const vSlack = 64

// kHead is head g's keys from position base on, in layer l (f16 cache).
func (c *kvCache) kHead(l, g, base int) []uint16 {
	dim := c.spec.HeadDim
	return c.k[l][(g*c.spec.Context+base)*dim : (g+1)*c.spec.Context*dim]
}

// vHead is head g's values from position base on, in layer l: dimension d's
// positions start at d·vStride (f16 cache).
func (c *kvCache) vHead(l, g, base int) []uint16 {
	per := c.spec.HeadDim * c.vStride
	return c.v[l][g*per+base : (g+1)*per]
}

// kRows and vRows are head g's key and value rows from position base on,
// in layer l (quantized cache).
func (c *kvCache) kRows(l, g, base int) []byte {
	return c.kq[l][(g*c.spec.Context+base)*c.kRow : (g+1)*c.spec.Context*c.kRow]
}

func (c *kvCache) vRows(l, g, base int) []byte {
	return c.vq[l][(g*c.spec.Context+base)*c.vRow : (g+1)*c.spec.Context*c.vRow]
}

// bytes is what K and V take, an f16 V's slack included.
func (c kvCache) bytes() int64 {
	s := c.spec
	if s.Quantized() {
		return s.Bytes()
	}
	return 2 * int64(s.Layers) * int64(s.KVHeads) * int64(s.HeadDim) * (int64(s.Context) + int64(c.vStride))
}

func (b *Backend) NewKVCache(spec infer.KVSpec) error {
	if err := spec.Check(); err != nil {
		return fmt.Errorf("cpu backend: %w", err)
	}
	b.kv = kvCache{}
	kv := kvCache{spec: spec}
	if spec.Quantized() {
		kv.kRow, kv.vRow = int(spec.K.RowBytes(spec.HeadDim)), int(spec.V.RowBytes(spec.HeadDim))
		kv.kRot, kv.vRot = rotationK(spec.K, spec.HeadDim), rotationV(spec.V, spec.HeadDim)
		kv.kq, kv.vq = make([][]byte, spec.Layers), make([][]byte, spec.Layers)
		for l := range spec.Layers {
			kv.kq[l] = make([]byte, spec.KVHeads*spec.Context*kv.kRow)
			kv.vq[l] = make([]byte, spec.KVHeads*spec.Context*kv.vRow)
		}
	} else {
		kv.vStride = spec.Context + vSlack
		kv.k, kv.v = make([][]uint16, spec.Layers), make([][]uint16, spec.Layers)
		for l := range spec.Layers {
			kv.k[l] = make([]uint16, spec.KVHeads*spec.Context*spec.HeadDim)
			kv.v[l] = make([]uint16, spec.KVHeads*spec.HeadDim*kv.vStride)
		}
	}
	b.kv = kv
	for w := range b.scores {
		b.scores[w] = make([]float32, spec.Context+vSlack)
		b.qf16[w] = make([]float32, spec.HeadDim)
		b.flash[w] = flashScratch{ // q8, q16 and acc: flashShares
			rot: make([]float32, spec.HeadDim),
			v32: make([]float32, spec.HeadDim),
		}
	}
	return nil
}

// maxPending is the most products MatMul queues (Q, K and V share an input).
const maxPending = 3

func (b *Backend) Begin(batch infer.Batch) {
	clear(b.pending)
	b.pending, b.pendingX = b.pending[:0], nil
	b.batch, b.n, b.inPass, b.err = batch, len(batch.Tokens), true, nil
	b.inRows, b.steps = false, batch.Steps
	b.ropeValid, b.actOf = false, nil
	switch {
	case b.closed:
		b.fail(errors.New("cpu backend: used after Close"))
	case b.n == 0:
		b.fail(fmt.Errorf("%w: empty batch", infer.ErrBadShape))
	case batch.Pos < 0:
		b.fail(fmt.Errorf("%w: negative position %d", infer.ErrBadShape, batch.Pos))
	case b.kv.spec.Context > 0 && batch.Pos+b.n > b.kv.spec.Context:
		b.fail(fmt.Errorf("%w: positions %d…%d past the cache's %d", infer.ErrContextFull, batch.Pos, batch.Pos+b.n-1, b.kv.spec.Context))
	}
	if b.profiling {
		b.phaseStart, b.inPhase = time.Now(), false
	}
}

func (b *Backend) Commit() error {
	if !b.inPass {
		return errors.New("cpu backend: Commit without Begin")
	}
	b.flush()
	b.endPhase(time.Now())
	if b.profiling && b.err == nil {
		b.sample.Tokens += b.n
	}
	err := b.err
	b.inPass, b.err = false, nil
	return err
}

func (b *Backend) Phase(p profile.Phase) {
	if !b.profiling {
		return
	}
	b.flush() // the queued products belong to the phase that is ending
	now := time.Now()
	b.endPhase(now)
	b.phase, b.phaseStart, b.inPhase = p, now, true
}

func (b *Backend) endPhase(now time.Time) {
	if b.profiling && b.inPhase {
		b.sample.Add(b.phase, now.Sub(b.phaseStart))
		b.inPhase = false
	}
}

func (b *Backend) SetProfiling(on bool) {
	b.profiling, b.inPhase = on, false
	b.sample = profile.Sample{Source: "cpu timers"}
}

func (b *Backend) TakeProfile() profile.Sample {
	s := b.sample
	b.sample = profile.Sample{Source: "cpu timers"}
	return s
}

func (b *Backend) Memory() infer.BackendMemory {
	return infer.BackendMemory{
		Weights:     b.weightBytes,
		Repacked:    b.repackedBytes,
		Activations: b.activationBytes,
		KV:          b.kv.bytes(),
	}
}

func (b *Backend) Close() error {
	if !b.closed {
		b.closed = true
		b.qpool.Close()
		b.weights, b.kv, b.rs, b.seqs = nil, kvCache{}, recurrentState{}, nil
	}
	return nil
}

// fail keeps the first error of the pass.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// ok reports whether the pass can go on. Every op calls it first, which is
// also where the quantized activations are forgotten: any op may change
// the tensor they came from.
func (b *Backend) ok() bool {
	b.flush()
	return b.check()
}

// check is ok without running the queued products.
func (b *Backend) check() bool {
	b.actOf = nil
	if !b.inPass {
		b.fail(errors.New("cpu backend: op outside Begin/Commit"))
		b.inPass = true
	}
	return b.err == nil
}

// active is the number of rows an op touches in t.
func (b *Backend) active(t *tensor) int { return min(t.rows, b.n) }

func (b *Backend) tensorOf(op string, t infer.Tensor) *tensor {
	ct, ok := t.(*tensor)
	if !ok || ct == nil {
		b.fail(fmt.Errorf("cpu backend: %s: operand %v is not a CPU tensor", op, t))
		return nil
	}
	return ct
}

func (b *Backend) weightOf(op string, w infer.Weight) *weight {
	cw, ok := w.(*weight)
	if !ok || cw == nil {
		b.fail(fmt.Errorf("cpu backend: %s: operand %v is not a CPU weight", op, w))
		return nil
	}
	return cw
}

// cpuModel reads the processor's name from /proc/cpuinfo (Linux), or
// falls back to the architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}
