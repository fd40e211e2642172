package gpu

import (
	"github.com/cogentcore/webgpu/wgpu"

	"github.com/bonsai-chat/bonsai/shaders"
)

// A prompt pass's Q1_0 GEMM by table lookup (shaders/q1_lutgemm.wgsl).
// The two numbers: 8B pp512 multiplies 6.95 G weights by 512 tokens,
// 7.1 T multiply-adds, and an f32 FMA per weight-token pair caps the H200
// (67 TFLOP/s) near 4,300 tok/s, q1_gemm2 reaching 39 % of that. Summing
// four weights' ±q from a 16-entry table costs one 16-byte workgroup load
// per 4 weights × 8 tokens and four integer adds, so the bound moves to
// workgroup-memory bandwidth (128 B/clock per SM: 256 pairs per clock,
// twice the FMA rate), with a table build per 32 k of 1/R of the reads.

// lutShape is q1_lutgemm's shape: R rows per thread (the workgroup
// takes 32·R rows × 64 tokens), and whether the slices are double-buffered
// (one barrier per slice instead of two).
type lutShape struct {
	r  int
	db bool
}

// buffers is how many copies of a slice's tables and scales it keeps.
func (sh lutShape) buffers() int {
	if sh.db {
		return 2
	}
	return 1
}

// lutShapes are the GemmKernels names that run q1_lutgemm.
var lutShapes = map[string]lutShape{"lut4": {4, true}, "lut8": {8, true}, "lut4s": {4, false}, "lut8s": {8, false}}

// lutFor is q1_lutgemm's shape for a prompt pass of n tokens over w (the
// default's is lut4s: the fastest on the H200 for the 1.7B, 8B and 27B
// shapes, and in the 32 KB of workgroup memory every adapter grants), or
// ok false where it cannot run: not Q1_0, a decode step, rows not a
// multiple of 4, K not of 128, workgroup memory too small, or another
// GEMM chosen.
func (b *Backend) lutFor(w *weight, n, rows int) (lutShape, bool) {
	name := b.gemm
	if name == "" || name == "auto" {
		name = "lut4s"
	}
	sh, ok := lutShapes[name]
	if !ok || !w.q1() || n < 2 || w.m%4 != 0 || w.k%128 != 0 {
		return sh, false
	}
	// the packed activations share x's rounding buffer
	if lutPackedWords(w.k, rows) > rows*w.k {
		return sh, false
	}
	if lutGemmWorkgroupBytes(sh) > int(b.d.Limits.MaxComputeWorkgroupStorageSize) {
		return sh, false
	}
	return sh, true
}

// lutGemmWorkgroupBytes is q1_lutgemm's workgroup memory: per buffer 16 KiB
// of tables, a word and a scale per row, 64 token scales.
func lutGemmWorkgroupBytes(sh lutShape) int {
	return sh.buffers() * (16<<10 + 32*sh.r*8 + 64*4)
}

// lutStride is the packed activations' token stride: the rows, made even
// so a vec2 holds a token pair.
func lutStride(rows int) int { return rows + rows%2 }

// lutPackedWords is the size of x packed for q1_lutgemm: K/4 words of
// four i8 and K/32 scales per token.
func lutPackedWords(k, rows int) int { return (k/4 + k/32) * lutStride(rows) }

// lutGemm encodes dst = x·wᵀ for n tokens with q1_lutgemm.
func (b *Backend) lutGemm(dst *tensor, w *weight, x *tensor, rows, n int, sh lutShape) {
	xp := b.packActivations(x, rows, n)
	if xp == nil {
		return
	}
	xs := lutStride(rows)
	bm, bufs := 32*sh.r, sh.buffers()
	o := b.prepared(opKey{kind: "q1lut", a: dst, b: w, c: x, g: sh}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("q1_lutgemm", q1Layout(map[string]shaders.Const{
			"K": shaders.U32(w.k), "M": shaders.U32(w.m), "XS": shaders.U32(xs), "BM": shaders.U32(bm), "BM4": shaders.U32(bm / 4),
			"SLICES": shaders.U32(w.k / 32), "XD": shaders.U32(w.k / 4 * xs / 2), "TSIZE": shaders.U32(1024 * bufs), "TMASK": shaders.U32(1024*bufs - 1),
			"WSIZE": shaders.U32(bufs * bm / 4), "DSIZE": shaders.U32(8 * bufs),
			"R8": shaders.Flag(sh.r == 8), "DB": shaders.Flag(sh.db)}, w.interleaved, w.m))
		return k, []binding{whole(b.batchBuf), w.bits.binding(), w.scales.binding(), whole(xp), whole(dst.buf)}, err
	})
	b.dispatch(o, ceilDiv(w.m, bm), ceilDiv(n, 64), 1)
	// the next matmul of x (gate after up, k after q) reuses the packing
	b.readRounded(x)
}

// packActivations rounds x's first n rows to Q8_0 and packs them for
// q1_lutgemm into x's rounding buffer (reused while x is unchanged, as
// roundActivations does).
func (b *Backend) packActivations(x *tensor, rows, n int) *wgpu.Buffer {
	const mode = "Q8P"
	if buf, current := b.roundingBuffer(x, mode); buf == nil || current {
		return buf
	}
	o := b.prepared(opKey{kind: "quantq8p", a: x, i: rows}, func() (*kernel, []binding, error) {
		k, err := b.d.kernel("quantize_q8p", map[string]shaders.Const{
			"K": shaders.U32(x.cols), "XROWS": shaders.U32(rows), "XS": shaders.U32(lutStride(rows))})
		return k, []binding{whole(b.batchBuf), whole(x.buf), whole(x.scratch)}, err
	})
	b.dispatch(o, ceilDiv(x.cols/32, 64), n, 1)
	b.rounded.x, b.rounded.mode, b.rounded.at = x, mode, b.dispatches
	return x.scratch
}
